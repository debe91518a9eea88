#include "io/checkpoint_json.h"

#include "core/error.h"
#include "io/json.h"

namespace coli {

namespace {
constexpr std::string_view kWeightMapKey = "weight_map";
}  // namespace

nlohmann::json checkpoint_config_parse(std::string_view json_text, std::string_view what) {
    nlohmann::json j = json_parse(json_text, what);
    check(j.is_object(), "{}: expected a JSON object, got {}", what, j.type_name());
    return j;
}

bool is_plain_file_name(std::string_view name) {
    // The index comes from the checkpoint, not from the user: a shard name must not reach outside the
    // checkpoint directory (absolute paths, "../x", "a/b") or be cut short by an embedded NUL.
    return !name.empty() && name != "." && name.find_first_of(std::string_view("/\\\0", 3)) == name.npos &&
           name.find("..") == name.npos;
}

std::map<std::string, std::string> checkpoint_index_parse(std::string_view json_text, std::string_view what) {
    nlohmann::json index = checkpoint_config_parse(json_text, what);
    auto it = index.find(kWeightMapKey);
    check(it != index.end(), "{}: no \"{}\"", what, kWeightMapKey);
    check(it->is_object(), "{}: \"{}\" is {}, expected an object", what, kWeightMapKey, it->type_name());
    check(!it->empty(), "{}: \"{}\" is empty", what, kWeightMapKey);
    std::map<std::string, std::string> weight_map;
    for (const auto& [name, shard] : it->items()) {
        check(!name.empty(), "{}: \"{}\" has an empty tensor name", what, kWeightMapKey);
        if (!shard.is_string())
            fail("{}: tensor {}: shard is {}, expected a file name", what, quote(name), shard.type_name());
        const auto& file = shard.get_ref<const std::string&>();
        if (!is_plain_file_name(file))
            fail("{}: tensor {}: shard {} is not a plain file name", what, quote(name), quote(file));
        weight_map.emplace(name, file);  // names are unique: json_parse rejects duplicate keys
    }
    return weight_map;
}

}  // namespace coli
