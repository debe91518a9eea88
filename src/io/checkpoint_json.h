// The JSON files of a checkpoint directory: config.json, generation_config.json and
// model.safetensors.index.json. Parsed from text so that the fuzzer can drive the same validation that
// Checkpoint::open uses.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace coli {

// A config file (config.json, generation_config.json): strict JSON (see json_parse) whose top level is an
// object. Throws coli::Error naming `what`.
nlohmann::json checkpoint_config_parse(std::string_view json_text, std::string_view what);

// model.safetensors.index.json: an object with a "weight_map" object of tensor name -> shard file name.
// Shard names must be plain file names in the checkpoint directory (no "/", no ".."), tensor names
// non-empty and unique. Other keys ("metadata") are ignored. Returns the weight map; throws coli::Error
// naming `what`.
std::map<std::string, std::string> checkpoint_index_parse(std::string_view json_text, std::string_view what);

// Whether `name` may be used as a shard file name: non-empty, no path separators, no "..", no NUL.
bool is_plain_file_name(std::string_view name);

}  // namespace coli
