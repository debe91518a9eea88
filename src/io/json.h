// Strict JSON for checkpoint files: parse errors and duplicate keys are coli::Errors naming the file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace coli {

// Parses `text` as JSON. Throws coli::Error naming `what` on a syntax error, invalid UTF-8, or a key that
// appears twice in one object (nlohmann keeps the last silently; a checkpoint with two values for one
// name is broken, and guessing which one was meant would hide it).
nlohmann::json json_parse(std::string_view text, std::string_view what);

// `s` as an error message shows it: JSON-quoted with control characters escaped (so that the message
// stays one line), shortened when long. For names that come from files.
std::string quote(std::string_view s);

// Reads a whole file into memory; throws coli::Error naming the file when it cannot be read.
std::string file_read_text(const std::filesystem::path& path);

// Reads a whole JSON file; throws coli::Error naming the file and the parse error.
nlohmann::json json_read_file(const std::filesystem::path& path);

}  // namespace coli
