// Reading config.json values with errors that name the key (configs are user input).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace coli {

// The value of a required key, converted to T; throws coli::Error naming the key when it is absent or
// of the wrong type.
template <typename T>
T config_get(const nlohmann::json& cfg, const std::string& key);

// The value of an optional key (null counts as absent), or `fallback`.
template <typename T>
T config_get_or(const nlohmann::json& cfg, const std::string& key, T fallback);

// Element i of the string list under key (per-layer types); throws coli::Error naming the key when the list
// is absent, too short or holds something else.
std::string config_list_item(const nlohmann::json& cfg, const std::string& key, size_t i);

// RoPE theta from either `rope_parameters.rope_theta` (transformers v5) or `rope_theta` (hub configs).
double config_rope_theta(const nlohmann::json& cfg, double fallback);

// YaRN's magnitude correction: 1 for scale <= 1, else 0.1 m ln(scale) + 1 (docs/models.md 2.3).
double yarn_mscale(double scale, double m);

}  // namespace coli
