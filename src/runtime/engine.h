// Everything a loaded model needs, built in the right order: checkpoint, backends, ops, model.
// Used by every command that runs a model (run, logits, chat, serve, bench) and by tests.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/ops.h"
#include "io/checkpoint.h"
#include "models/model.h"

namespace coli {

class ThreadPool;

struct EngineOptions {
    std::filesystem::path model_dir;
    std::string backend = "auto";  // a name from backend_list(), or "auto" (the best device, else the CPU)
    int threads = 0;               // CPU threads; 0 = all cores
    double ram_gb = 0;             // expert cache budget in GB; 0 = unlimited
    double vram_gb = 0;  // device budget for dense weights + the expert tier, GB; 0 = free less a reserve
    // The backends' own options by name (BackendOption: "vk-device" for --vk-device); absent: defaults.
    std::map<std::string, std::string> backend_options;
    int expert_cache = 0;   // expert slots per layer; 0 = no limit
    int io_threads = 4;     // concurrent expert reads
    bool direct_io = true;  // O_DIRECT for expert reads where possible
    // With no RAM budget and no slot limit, use the experts in place from the checkpoint's file mappings
    // (ExpertSource::mapped) instead of copying them into a cache; false always reads.
    bool mmap = true;
    std::string hot_set =
        "auto";           // routing history: "auto" (the user's cache, io/user_cache.h), "none", a path
    int dense_bits = 0;   // 0 | 8 | 4
    int64_t max_ctx = 0;  // 0 = the model's maximum
    bool preload =
        false;  // read experts into RAM at start, as many as the budget holds (ExpertStore::preload)
    // Load the model's multi-token-prediction layer and decode speculatively with it (LoadOptions::draft).
    bool speculate = false;
};

class Engine {
public:
    explicit Engine(const EngineOptions& opts);  // throws coli::Error with a one-line reason
    ~Engine();

    Checkpoint& checkpoint() { return *ckpt_; }
    Backend& backend() { return *backend_; }
    Ops& ops() { return *ops_; }
    Model& model() { return *model_; }
    const EngineOptions& options() const { return opts_; }
    // With --backend auto: which backend it chose and what it passed over, for stderr; else empty.
    const std::string& backend_note() const { return backend_note_; }
    // With preload: what it read and how long it took; else empty.
    const std::string& preload_note() const { return preload_note_; }

private:
    EngineOptions opts_;
    std::string backend_note_;
    std::string preload_note_;
    std::unique_ptr<ThreadPool> own_pool_;  // with --threads; else the process-wide pool
    std::unique_ptr<Checkpoint> ckpt_;
    std::unique_ptr<Backend> cpu_, backend_;
    std::unique_ptr<Ops> ops_;
    std::unique_ptr<Model> model_;
};

inline constexpr double kBytesPerGB = 1e9;

}  // namespace coli
