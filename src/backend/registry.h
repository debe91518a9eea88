// Which backends exist in this build and on this machine, and creating one by name. Every backend folder
// registers itself with one BackendEntry (its entry.cpp, listed by its backend.cmake); this file and the CLI
// name none of them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace coli {

class ThreadPool;

// What a backend answers for an op from its kernels alone (format and shape), without a device: the
// capability `coli backends` shows. The live Backend::supports() also checks residency and limits.
using SupportFn = bool (*)(const OpDesc& d);

struct BackendInfo {
    std::string name;             // "cpu", "cuda", "vulkan", "metal"
    bool compiled;                // built into this binary
    bool available;               // compiled and a usable device was found
    std::string detail;           // the device when available, else why not and how to fix it
    SupportFn support = nullptr;  // capability by op, format and shape; nullptr: no backend written yet
    std::string auto_skip;  // why `auto` passes over it although available (a software device), or empty
    SupportFn host_step = nullptr;  // of the ops it supports, those it runs as host steps; nullptr: none
};

// Choices a backend takes at creation.
struct BackendOptions {
    uint64_t vram_bytes =
        0;  // budget for resident weights and the expert tier; 0 = free memory less a reserve
    // A backend's own options by name (BackendOption::name), as given on the command line; absent: its
    // default.
    std::map<std::string, std::string> values;
};

// An option of one backend, which every command that creates backends offers as --NAME.
struct BackendOption {
    std::string name;           // "vk-device": the flag --vk-device and the key in BackendOptions::values
    std::string help;           // the flag's help
    std::string default_value;  // what the backend takes when the flag is not given
    bool integer = false;       // an integer (backend_option_int reads it)
};
// An integer option's value (its default when not given); a value that is not an integer is a coli::Error
// naming the flag.
int64_t backend_option_int(const BackendOptions& o, const BackendOption& option);

// One backend, as its folder registers it.
struct BackendEntry {
    std::string name;               // "cuda"
    int rank = 0;                   // order of preference for `auto` and in every list (lower first)
    SupportFn support = nullptr;    // the capability table, built into every binary; nullptr: none yet
    SupportFn host_step = nullptr;  // of the ops it supports, those it runs as host steps; nullptr: none
    std::vector<BackendOption> options = {};  // its own flags
    // Compiled in: whether a usable device is here (fills available, detail, auto_skip of the info).
    BackendInfo (*probe)(const BackendOptions& o) = nullptr;
    std::string absent = {};  // not compiled in (no probe): why, and how to build it
    std::unique_ptr<Backend> (*create)(ThreadPool& pool, const BackendOptions& o) = nullptr;
    // `coli test-ops --bench`: the device kernels' speed beside their bounds, as tables on stdout; or none.
    void (*bench)(const BackendOptions& o) = nullptr;
};

// Every backend's entry (generated from the backend folders at configure time), in no particular order.
std::vector<BackendEntry> backend_entries_registered();

// Every backend the project knows, in order of rank (best first for `auto`).
const std::vector<BackendEntry>& backend_entries();
// The named backend's entry; an unknown name is a coli::Error listing the known ones.
const BackendEntry& backend_entry(std::string_view name);
// "auto, cuda, vulkan, metal, cpu": what --backend takes.
std::string backend_names();

// Every backend with what this machine has for it, in rank order; probes each one compiled in.
std::vector<BackendInfo> backend_list(const BackendOptions& opts = {});

// The backend "auto" stands for: the first available in backend_list() order that is not passed over (a
// software device such as lavapipe). `passed` (if given) gets what was passed over and why, as
// "; vulkan skipped: ...". Throws coli::Error when none is available.
std::string backend_auto_pick(const BackendOptions& opts = {}, std::string* passed = nullptr);

// Creates the named backend; "auto" picks the first available in backend_list() order and says so on
// stderr. An unknown name, or one not compiled in or without a device, is a coli::Error that says why
// and what to do.
std::unique_ptr<Backend> backend_create(std::string_view name, ThreadPool& pool,
                                        const BackendOptions& opts = {});

}  // namespace coli
