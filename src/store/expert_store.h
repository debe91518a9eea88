// The expert store: where each routed expert's bytes are on disk, a RAM cache with a hard budget,
// reads that overlap compute, a pinned hot set learned from routing history, and statistics.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace coli {

// What the model tells the store: which checkpoint tensors make up expert e of layer l.
struct ExpertLayout {
    int n_layers = 0;   // layers of the model (some may have no routed experts)
    int n_experts = 0;  // routed experts per MoE layer
    int top_k = 0;      // experts a token uses per layer (sizes the minimum budget)
    // Names of the tensors of expert e in layer l, in the order ExpertHandle::part() returns them;
    // an empty vector for layers without routed experts.
    std::function<std::vector<std::string>(int layer, int expert)> tensor_names;
};

// Where a cached expert's bytes live.
enum class ExpertSource : uint8_t {
    read,    // copied by reads into RAM the store allocates, within its budget (O_DIRECT where asked)
    mapped,  // views of the checkpoint's shared file mappings: the page cache holds them, nothing is copied
};

struct StoreOptions {
    // Mapped needs no budget and no slot limit: nothing is ever evicted (the kernel may drop clean pages
    // under memory pressure and read them again on the next use).
    ExpertSource source = ExpertSource::read;
    uint64_t ram_bytes = 0;         // hard limit on cached expert bytes; 0 = unlimited
    int slots_per_layer = 0;        // at most this many experts cached per layer; 0 = no limit
    int io_threads = 4;             // concurrent reads
    bool direct_io = true;          // O_DIRECT where the filesystem allows it
    std::filesystem::path hot_set;  // routing-history file; empty = no hot set (unless hot_set_dir)
    // Or a directory that keeps the routing histories of many models, each in a file named by the
    // model's fingerprint (hotset-<fingerprint>.json; the directory is created when first saved).
    std::filesystem::path hot_set_dir;
    double hot_fraction = 0.5;  // share of the budget that the pinned hot set may take
    // Called with each read's file index and byte offset as it is queued, in issue order (tests, tracing).
    std::function<void(int file, uint64_t offset)> read_issued;
};

// An expert read that takes longer than this is counted as slow (StoreStats::slow_reads) and the first one
// is warned about: the disk or filesystem is stalling, and tokens wait for it.
inline constexpr double kSlowReadSeconds = 1.0;

// Counters since the store was opened.
struct StoreStats {
    uint64_t hits = 0;              // fetches served from RAM
    uint64_t misses = 0;            // fetches that needed a read
    uint64_t evictions = 0;         // experts dropped to stay within the budget
    uint64_t bytes_read = 0;        // bytes read (aligned ranges, as issued); mapped: bytes brought in
    bool mapped = false;            // the experts are views of the file mappings (ExpertSource::mapped)
    double read_seconds = 0;        // wall time with at least one read in flight
    double stall_seconds = 0;       // time fetch() waited for reads
    uint64_t slow_reads = 0;        // reads that took longer than kSlowReadSeconds
    uint64_t cached_bytes = 0;      // bytes held now (<= budget)
    uint64_t kept_bytes = 0;        // bytes of read buffers kept for reuse now (with those held: <= budget)
    uint64_t budget_bytes = 0;      // the RAM budget now (0 = unlimited): lowered when an allocation failed
    uint64_t budget_lowerings = 0;  // times an allocation failed and the budget was lowered
    uint64_t pinned_experts = 0;    // experts in the hot set now
    // Routing statistics (see docs/design.md: synthetic models lie about caching).
    double distinct_per_layer = 0;  // mean over MoE layers of distinct experts used
    double consecutive_shared = 0;  // mean experts shared by consecutive tokens in a layer
    uint64_t tokens_routed = 0;     // token-layer routings recorded
    // Routed-expert layers as models run them (moe_routed): fetches, waits for reads and the experts'
    // compute (as queued, on a backend that runs asynchronously).
    double moe_seconds = 0;  // wall time
    uint64_t moe_calls = 0;  // layer calls (each over a group of tokens)

    double read_gbps() const { return read_seconds > 0 ? bytes_read / read_seconds / 1e9 : 0; }
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0; }
};

class ExpertStore;

// A cached expert, pinned in RAM while any handle to it is alive.
class ExpertHandle {
public:
    int layer() const;
    int expert() const;
    size_t part_count() const;
    std::span<const uint8_t> part(size_t i) const;  // bytes of tensor i (ExpertLayout order)
    const TensorInfo& part_info(size_t i) const;    // its dtype and shape
    bool part_nan_free(size_t i) const;             // an F8_E4M3 part holds no NaN code (checked as read)

    struct Entry;  // store-private
    explicit ExpertHandle(std::shared_ptr<Entry> e) : entry_(std::move(e)) {}

private:
    std::shared_ptr<Entry> entry_;
};

class ExpertStore {
public:
    // Indexes every expert's byte ranges from the checkpoint's headers (one read per expert where its
    // tensors are adjacent on disk) and loads the hot set if it belongs to this model (else warns).
    ExpertStore(const Checkpoint& ckpt, ExpertLayout layout, StoreOptions opts);
    ~ExpertStore();  // saves the hot set

    // Starts reads for those experts that are not cached, in disk-offset order; returns at once.
    // Never exceeds the budget: experts that do not fit are left for fetch().
    void prefetch(int layer, std::span<const int> experts);

    // Returns handles for the experts (same order), reading the missing ones (issued at once, in
    // disk-offset order, on the I/O threads) and waiting for them. Throws coli::Error if the experts
    // cannot fit in the budget at once; see max_resident(). A read whose buffer cannot be allocated lowers
    // the budget to what the store held and is tried again; if the request still does not fit, it throws
    // coli::OutOfMemory, and a smaller max_resident() says whether fewer experts at a time would.
    std::vector<ExpertHandle> fetch(int layer, std::span<const int> experts);

    // Reads experts into the cache before any token needs them, layer by layer and in disk order within a
    // layer, until the next would not fit without evicting one already held (every expert without a
    // budget), and waits for the reads. A server's first prompts then wait for no disk.
    struct Preloaded {
        uint64_t experts = 0;     // experts read
        uint64_t of_experts = 0;  // routed experts of the model (its MoE layers')
        uint64_t bytes = 0;       // their bytes (as total_expert_bytes counts them)
    };
    Preloaded preload();

    // How many experts of `layer` can be held at once within the budget and slot limit (>= 1).
    int max_resident(int layer) const;
    // Whether every expert of `layer` is cached or being read, so that a prefetch would read nothing.
    bool layer_held(int layer) const;

    // Records the experts one token was routed to in `layer` (routing statistics and hot set).
    void routing_record(int layer, std::span<const int> experts);
    // Adds the wall time of one routed-expert layer (moe_routed) to StoreStats::moe_seconds.
    void moe_time_record(double seconds);

    StoreStats stats() const;
    // How long the oldest expert read still in flight has waited (0: none in flight); any thread may ask,
    // while fetch() waits for that read (a stalling disk shows here before the read returns).
    double read_in_flight_seconds() const;
    uint64_t expert_bytes(int layer, int expert) const;  // bytes of one expert's tensors
    uint64_t total_expert_bytes() const;                 // all routed experts
    const ExpertLayout& layout() const;

    void hot_set_save() const;  // writes the routing history (if a path or directory is set)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace coli
