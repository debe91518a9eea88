#include "backend/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace coli {

namespace {

BackendInfo info_of(const BackendEntry& e, const BackendOptions& opts) {
    if (e.probe == nullptr) return {e.name, false, false, e.absent, e.support, "", e.host_step};
    BackendInfo info = e.probe(opts);
    info.name = e.name;
    info.compiled = true;
    info.support = e.support;
    info.host_step = e.host_step;
    return info;
}

}  // namespace

int64_t backend_option_int(const BackendOptions& o, const BackendOption& option) {
    const auto it = o.values.find(option.name);
    const std::string& text = it == o.values.end() ? option.default_value : it->second;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    check(ec == std::errc() && end == text.data() + text.size(), "--{}: expected an integer, got '{}'",
          option.name, text);
    return v;
}

const std::vector<BackendEntry>& backend_entries() {
    static const std::vector<BackendEntry> entries = [] {
        std::vector<BackendEntry> e = backend_entries_registered();
        std::ranges::stable_sort(e, {}, &BackendEntry::rank);
        return e;
    }();
    return entries;
}

std::string backend_names() {
    std::string names = "auto";
    for (const BackendEntry& e : backend_entries()) names += ", " + e.name;
    return names;
}

const BackendEntry& backend_entry(std::string_view name) {
    for (const BackendEntry& e : backend_entries())
        if (e.name == name) return e;
    fail("unknown backend '{}' (known: {})", name, backend_names());
}

std::vector<BackendInfo> backend_list(const BackendOptions& opts) {
    std::vector<BackendInfo> all;
    for (const BackendEntry& e : backend_entries()) all.push_back(info_of(e, opts));
    return all;
}

std::unique_ptr<Backend> backend_create(std::string_view name, ThreadPool& pool, const BackendOptions& opts) {
    if (name != "auto") {
        const BackendEntry& e = backend_entry(name);
        const BackendInfo b = info_of(e, opts);
        if (!b.available) {  // say what can be used instead
            std::string usable;
            for (const BackendInfo& other : backend_list(opts))
                if (other.available) usable += (usable.empty() ? "" : ", ") + other.name;
            fail("backend '{}' is unavailable: {}; available here: {} (or auto)", b.name, b.detail, usable);
        }
        return e.create(pool, opts);
    }
    std::string passed;
    const std::string chosen = backend_auto_pick(opts, &passed);
    fmt::print(stderr, "backend auto: chose {}{}\n", chosen, passed);
    return backend_entry(chosen).create(pool, opts);
}

std::string backend_auto_pick(const BackendOptions& opts, std::string* passed_out) {
    std::string chosen, passed;
    for (const BackendInfo& b : backend_list(opts)) {
        if (b.available && b.auto_skip.empty()) {
            chosen = b.name;
            break;
        }
        passed += fmt::format("; {} skipped: {}", b.name, b.available ? b.auto_skip : b.detail);
    }
    check(!chosen.empty(), "backend auto: no backend is available{}", passed);
    if (passed_out) *passed_out = passed;
    return chosen;
}

}  // namespace coli
