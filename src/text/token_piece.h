// A token's piece as JSON, for the tools that show how text was cut (`coli tokenize --pieces`, the server's
// POST /tokenize with_pieces): its bytes as a string when they are valid UTF-8, else as a list of byte
// values, since a byte-level token may hold part of a character (llama.cpp's server answers the same way).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace coli::text {

nlohmann::json token_piece_json(std::string_view bytes);

}  // namespace coli::text
