#include "store/hot_set.h"

#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "io/atomic_write.h"
#include "io/json.h"

namespace coli {

namespace {

constexpr const char* kFormatName = "colibri-hot-set";

// Why `j` is not a routing history of this model, or "" when it is.
std::string reject_reason(const nlohmann::json& j, int n_layers, int n_experts,
                          const std::string& fingerprint) {
    if (!j.is_object()) return "not a JSON object";
    if (!j.contains("format") || j["format"] != kFormatName) return "not a colibri hot-set file";
    if (!j.contains("version") || !j["version"].is_number_integer()) return "no format version";
    if (j["version"] != kHotSetFormatVersion)
        return fmt::format("format version {} (this build reads version {})", j["version"].dump(),
                           kHotSetFormatVersion);
    if (!j.contains("fingerprint") || j["fingerprint"] != fingerprint)
        return "it was recorded for another model (fingerprint mismatch)";
    if (j.value("n_layers", -1) != n_layers || j.value("n_experts", -1) != n_experts)
        return "its layer or expert count differs from this model's";
    const auto it = j.find("counts");
    if (it == j.end() || !it->is_array() || it->size() != size_t(n_layers)) return "malformed counts";
    for (const auto& row : *it) {
        if (!row.is_array() || row.size() != size_t(n_experts)) return "malformed counts";
        for (const auto& c : row)
            if (!c.is_number_unsigned()) return "malformed counts";
    }
    return "";
}

}  // namespace

RoutingHistory::RoutingHistory(int n_layers, int n_experts, std::string fingerprint)
    : n_layers_(n_layers),
      n_experts_(n_experts),
      fingerprint_(std::move(fingerprint)),
      counts_(size_t(n_layers) * size_t(n_experts), 0) {}

void RoutingHistory::record(int layer, std::span<const int> experts) {
    for (int e : experts) ++counts_[key(layer, e)];
    ++unsaved_;
}

bool RoutingHistory::load(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return false;  // the first run: nothing learned yet
    nlohmann::json j;
    try {
        j = json_read_file(path);
    } catch (const Error& e) {
        log_warn("ignoring the routing history: {}", e.what());
        return false;
    }
    std::string why;
    try {
        why = reject_reason(j, n_layers_, n_experts_, fingerprint_);
    } catch (const nlohmann::json::exception&) {  // a field of the wrong type
        why = "malformed fields";
    }
    if (!why.empty()) {
        log_warn("ignoring the routing history {}: {}", path.string(), why);
        return false;
    }
    const auto& rows = j["counts"];
    for (int l = 0; l < n_layers_; ++l)
        for (int e = 0; e < n_experts_; ++e) counts_[key(l, e)] = rows[l][e].get<uint64_t>();
    unsaved_ = 0;
    return true;
}

void RoutingHistory::save_failed(const std::string& why) {
    if (!save_warned_)
        log_warn("the routing history is not kept: cannot write {} (--hot-set none turns it off)", why);
    else
        log_debug("cannot write the routing history to {}", why);
    save_warned_ = true;
}

bool RoutingHistory::save(const std::filesystem::path& path) {
    nlohmann::json rows = nlohmann::json::array();
    for (int l = 0; l < n_layers_; ++l) {
        auto begin = counts_.begin() + static_cast<ptrdiff_t>(key(l, 0));
        rows.push_back(std::vector<uint64_t>(begin, begin + n_experts_));
    }
    const nlohmann::json j = {{"format", kFormatName},       {"version", kHotSetFormatVersion},
                              {"fingerprint", fingerprint_}, {"n_layers", n_layers_},
                              {"n_experts", n_experts_},     {"counts", std::move(rows)}};
    const std::string text = j.dump() + "\n";

    // A failed write (a full disk) leaves the older file as it was (io/atomic_write.h).
    if (const std::string failed = file_write_atomic(path, [&](std::ostream& f) { f << text; });
        !failed.empty()) {
        save_failed(failed);
        return false;
    }
    unsaved_ = 0;
    return true;
}

std::vector<char> RoutingHistory::select(const std::function<uint64_t(int, int)>& cost, uint64_t byte_cap,
                                         int per_layer_cap) const {
    std::vector<char> hot(counts_.size(), 0);
    if (byte_cap == 0 || per_layer_cap <= 0) return hot;
    std::vector<std::tuple<uint64_t, int, int>> used;  // (count, layer, expert)
    for (int l = 0; l < n_layers_; ++l)
        for (int e = 0; e < n_experts_; ++e)
            if (uint64_t c = counts_[key(l, e)]; c > 0) used.emplace_back(c, l, e);
    std::sort(used.begin(), used.end(), [](const auto& a, const auto& b) {
        return std::tuple(std::get<0>(b), std::get<1>(a), std::get<2>(a)) <
               std::tuple(std::get<0>(a), std::get<1>(b), std::get<2>(b));
    });
    std::vector<int> per_layer(n_layers_, 0);
    uint64_t left = byte_cap;
    for (const auto& [count, l, e] : used) {
        const uint64_t c = cost(l, e);
        if (c > left || per_layer[l] >= per_layer_cap) continue;  // a smaller one further down may fit
        hot[key(l, e)] = 1;
        left -= c;
        ++per_layer[l];
    }
    return hot;
}

}  // namespace coli
