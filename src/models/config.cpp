#include "models/config.h"

#include <cmath>

#include "core/error.h"

namespace coli {

template <typename T>
T config_get(const nlohmann::json& cfg, const std::string& key) {
    auto it = cfg.find(key);
    check(it != cfg.end() && !it->is_null(), "config.json: missing '{}'", key);
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception&) {
        fail("config.json: '{}' has the wrong type ({})", key, it->type_name());
    }
}

template <typename T>
T config_get_or(const nlohmann::json& cfg, const std::string& key, T fallback) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return fallback;
    return config_get<T>(cfg, key);
}

std::string config_list_item(const nlohmann::json& cfg, const std::string& key, size_t i) {
    auto it = cfg.find(key);
    check(it != cfg.end() && it->is_array(), "config.json: missing list '{}'", key);
    check(i < it->size(), "config.json: '{}' has {} entries, layer {} needs one", key, it->size(), i);
    check((*it)[i].is_string(), "config.json: '{}'[{}] is not a string", key, i);
    return (*it)[i].get<std::string>();
}

double config_rope_theta(const nlohmann::json& cfg, double fallback) {
    auto params = cfg.find("rope_parameters");
    if (params != cfg.end() && params->is_object())
        return config_get_or<double>(*params, "rope_theta", fallback);
    return config_get_or<double>(cfg, "rope_theta", fallback);
}

double yarn_mscale(double scale, double m) {
    return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

template int config_get<int>(const nlohmann::json&, const std::string&);
template int64_t config_get<int64_t>(const nlohmann::json&, const std::string&);
template double config_get<double>(const nlohmann::json&, const std::string&);
template bool config_get<bool>(const nlohmann::json&, const std::string&);
template std::string config_get<std::string>(const nlohmann::json&, const std::string&);
template int config_get_or<int>(const nlohmann::json&, const std::string&, int);
template int64_t config_get_or<int64_t>(const nlohmann::json&, const std::string&, int64_t);
template double config_get_or<double>(const nlohmann::json&, const std::string&, double);
template bool config_get_or<bool>(const nlohmann::json&, const std::string&, bool);
template std::string config_get_or<std::string>(const nlohmann::json&, const std::string&, std::string);

}  // namespace coli
