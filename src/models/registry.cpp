#include "models/registry.h"

#include <functional>
#include <map>

#include "core/error.h"

namespace coli {
namespace {

using Loader = std::function<std::unique_ptr<Model>(const Checkpoint&, Ops&, const LoadOptions&)>;

struct Family {
    Loader load;
    bool drafts = false;  // runs its multi-token-prediction layer (LoadOptions::draft)
};

const std::map<std::string, Family>& loaders() {
    static const std::map<std::string, Family> m = {
        {"deepseek_v3", {deepseek_v3_load, true}},
        {"deepseek_v32", {deepseek_v3_load, true}},
        {"deepseek_v4", {deepseek_v4_load}},
        {"glm_moe_dsa", {deepseek_v3_load, true}},
        {"kimi_k3", {kimi_load}},
        {"kimi_linear", {kimi_load}},
        {"olmoe", {olmoe_load}},
    };
    return m;
}

}  // namespace

std::vector<std::string> model_families() {
    std::vector<std::string> names;
    for (const auto& [name, _] : loaders()) names.push_back(name);
    return names;
}

std::unique_ptr<Model> model_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) {
    const auto& cfg = ckpt.config();
    auto it = cfg.find("model_type");
    check(it != cfg.end() && it->is_string(), "{}: config.json has no model_type", ckpt.dir().string());
    const std::string type = it->get<std::string>();
    auto loader = loaders().find(type);
    if (loader == loaders().end()) {
        std::string known;
        for (const auto& name : model_families()) known += (known.empty() ? "" : ", ") + name;
        fail("{}: model_type '{}' is not supported (supported: {})", ckpt.dir().string(), type, known);
    }
    if (opts.draft && !loader->second.drafts) {
        std::string drafting;
        for (const auto& [name, family] : loaders())
            if (family.drafts) drafting += (drafting.empty() ? "" : ", ") + name;
        fail(
            "{}: speculative decoding drafts with the model's own multi-token-prediction layer, which coli "
            "runs for {} only",
            type, drafting);
    }
    return loader->second.load(ckpt, ops, opts);
}

}  // namespace coli
