#include "runtime/engine.h"

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "io/model_path.h"
#include "io/user_cache.h"

namespace coli {

Engine::Engine(const EngineOptions& opts) : opts_(opts) {
    check(opts.ram_gb >= 0, "--ram-gb must be >= 0, got {}", opts.ram_gb);
    check(opts.expert_cache >= 0, "--expert-cache must be >= 0, got {}", opts.expert_cache);
    check(opts.io_threads > 0, "--io-threads must be > 0, got {}", opts.io_threads);
    // An engine with its own thread count gets its own pool: replacing the process-wide one would pull it
    // from under anyone holding it.
    if (opts.threads > 0) own_pool_ = std::make_unique<ThreadPool>(opts.threads);
    ThreadPool& pool = own_pool_ ? *own_pool_ : default_pool();
    // A directory, or a Hugging Face repo id found in the local Hugging Face cache.
    ckpt_ = Checkpoint::open(model_path_resolve(opts.model_dir.string()));
    cpu_ = std::make_unique<CpuBackend>(pool);
    check(opts.vram_gb >= 0, "--vram-gb must be >= 0, got {}", opts.vram_gb);
    const BackendOptions backend_opts{static_cast<uint64_t>(opts.vram_gb * kBytesPerGB),
                                      opts.backend_options};
    // "auto" is resolved here and said by the caller once the model is loaded (backend_note), so that a
    // failure before is still one line.
    std::string backend = opts.backend;
    if (backend == "auto") {
        std::string passed;
        backend = backend_auto_pick(backend_opts, &passed);
        backend_note_ = fmt::format("backend auto: chose {}{}", backend, passed);
    }
    backend_ = backend_create(backend, pool, backend_opts);
    Backend& primary = backend_->name() == "cpu" ? *cpu_ : *backend_;
    ops_ = std::make_unique<Ops>(primary, *cpu_);

    LoadOptions load;
    load.dense_bits = opts.dense_bits;
    load.draft = opts.speculate;
    load.max_ctx = opts.max_ctx;
    load.store.ram_bytes = static_cast<uint64_t>(opts.ram_gb * kBytesPerGB);
    load.store.slots_per_layer = opts.expert_cache;
    load.store.io_threads = opts.io_threads;
    load.store.direct_io = opts.direct_io;
    // Without a budget every expert stays once read, so a copy would only double what the page cache holds.
    if (opts.mmap && opts.ram_gb == 0 && opts.expert_cache == 0) load.store.source = ExpertSource::mapped;
    // The routing history of "auto" lives in the user's cache, named by the model's fingerprint, never
    // in the model's directory (read-only or shared, often).
    if (opts.hot_set == "auto")
        load.store.hot_set_dir = user_cache_dir();
    else if (opts.hot_set != "none")
        load.store.hot_set = opts.hot_set;
    model_ = model_load(*ckpt_, *ops_, load);
    if (opts.preload) {
        const Timer timer;
        ExpertStore& store = model_->store();
        const ExpertStore::Preloaded p = store.preload();
        preload_note_ = fmt::format("experts preloaded: {} of {} ({:.2f} of {:.2f} GB) in {:.1f} s",
                                    p.experts, p.of_experts, p.bytes / kBytesPerGB,
                                    store.total_expert_bytes() / kBytesPerGB, timer.seconds());
    }
}

Engine::~Engine() = default;

}  // namespace coli
