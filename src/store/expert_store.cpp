// The store ties the parts together: the index (where the bytes are), the cache (what is held, within
// the budget), the I/O queue (the reads), the routing history (what to pin) and the routing statistics.
// One mutex guards the cache, the history and the counters; the I/O threads take it only to hand over a
// finished read.
#include "store/expert_store.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "formats/format.h"
#include "io/file.h"
#include "store/buffer_pool.h"
#include "store/expert_cache.h"
#include "store/expert_entry.h"
#include "store/expert_index.h"
#include "store/hot_set.h"
#include "store/io_queue.h"
#include "store/read_buffer.h"
#include "store/routing_stats.h"

namespace coli {

namespace {

using Entry = ExpertHandle::Entry;

constexpr double kGB = 1e9;  // --ram-gb is in decimal gigabytes

// A --ram-gb value that holds `bytes`: rounded up to the hundredth.
std::string ram_gb_for(uint64_t bytes) {
    return fmt::format("{:.2f}", std::ceil(bytes / kGB * 100) / 100);
}

// A read to issue: sorted by disk position before submission.
struct PendingRead {
    int file;
    uint64_t offset;
    Entry* entry;
    uint32_t read;
};

}  // namespace

struct ExpertStore::Impl {
    Impl(const Checkpoint& ckpt, ExpertLayout layout, StoreOptions opts);

    void check_request(int layer, std::span<const int> experts) const;
    std::shared_ptr<Entry> new_entry(int layer, int expert);
    void add_reads(Entry* e, std::vector<PendingRead>& reads);
    void submit(std::vector<PendingRead>& reads);                   // in (file, offset) order; clears `reads`
    void run_read(Entry* e, uint32_t read);                         // on an I/O thread
    void refresh_hot_set();                                         // lock held
    void sort_by_disk(int layer, std::vector<int>& experts) const;  // by (file, offset) of the first read
    // Waits (lock held on `lock`) until none of `entries` is loading, adding the wait to stall_seconds when
    // count_stall; throws coli::Error naming the first whose read failed.
    void wait_ready(std::unique_lock<std::mutex>& lock, const std::vector<std::shared_ptr<Entry>>& entries,
                    bool count_stall);
    int max_resident(int layer) const;            // lock held
    uint64_t hot_cap_for(uint64_t budget) const;  // bytes the hot set may take of it
    // The most bytes the experts one token uses in a layer take: top_k of the largest.
    uint64_t token_bytes() const { return std::max(1, layout.top_k) * index->max_buffer_bytes(); }
    // After an allocation for a read of `e` failed (`why`): lowers the budget to what the store had
    // allocated then, at least the experts a token uses in a layer, evicting to fit, and warns. False
    // when it cannot go lower. Lock held.
    bool budget_lower(const Entry& e, const std::string& why);
    [[noreturn]] void fail_too_big(int layer, const std::vector<std::shared_ptr<Entry>>& held_for_request,
                                   const std::vector<int>& missing) const;

    const Checkpoint& ckpt;
    const ExpertLayout layout;
    const StoreOptions opts;
    const std::shared_ptr<const ExpertIndex> index;
    // The routing-history file: opts.hot_set, or the model's file in opts.hot_set_dir; empty = none.
    const std::filesystem::path hot_path;
    // By checkpoint file index; opened once (with O_DIRECT when asked and allowed), shared by the threads.
    std::vector<std::unique_ptr<ReadFile>> files;
    const bool hot_enabled;
    uint64_t hot_cap = 0;  // bytes the pinned hot set may take
    int pin_slots = 0;     // experts per layer the pinned hot set may take

    mutable std::mutex mu;
    std::condition_variable read_done;  // signalled whenever a read finishes
    uint64_t reads_finished = 0;
    ExpertCache cache;
    RoutingHistory history;
    RoutingStats routing;
    std::vector<char> hot;  // the pinned hot set, by index->key(layer, expert)
    uint64_t hot_experts = 0;
    uint64_t records_since_refresh = 0;
    uint64_t hits = 0, misses = 0, bytes_read = 0;
    uint64_t budget_lowerings = 0;
    double stall_seconds = 0;
    uint64_t slow_reads = 0;
    double moe_seconds = 0;
    uint64_t moe_calls = 0;

    // Shared with the buffers, which go back to it when their expert is dropped (perhaps after the store).
    const std::shared_ptr<BufferPool> pool;
    IoQueue io;  // last: destroyed (joined) first, so no read finishes into a half-destroyed store
};

ExpertStore::Impl::Impl(const Checkpoint& ckpt_, ExpertLayout layout_, StoreOptions opts_)
    : ckpt(ckpt_),
      layout(std::move(layout_)),
      opts(opts_),
      index(std::make_shared<const ExpertIndex>(ckpt, layout)),
      hot_path(opts.hot_set_dir.empty() ? opts.hot_set
                                        : opts.hot_set_dir / ("hotset-" + index->fingerprint() + ".json")),
      hot_enabled(!hot_path.empty()),
      cache(index->n_layers(), index->n_experts(), opts.ram_bytes, opts.slots_per_layer),
      history(index->n_layers(), index->n_experts(), index->fingerprint()),
      routing(index->n_layers(), index->n_experts()),
      hot(size_t(index->n_layers()) * size_t(index->n_experts()), 0),
      pool(std::make_shared<BufferPool>(opts.ram_bytes)),
      io(opts.io_threads) {
    check(opts.slots_per_layer >= 0, "expert store: slots per layer must be >= 0, not {}",
          opts.slots_per_layer);
    check(opts.io_threads >= 1, "expert store: it needs at least one I/O thread, not {}", opts.io_threads);
    check(opts.source == ExpertSource::read || (opts.ram_bytes == 0 && opts.slots_per_layer == 0),
          "expert store: experts used in place from the file mappings take no RAM budget or slot limit");
    check(opts.hot_fraction >= 0 && opts.hot_fraction <= 1,
          "expert store: the hot set's share of the budget must be within [0, 1], not {}", opts.hot_fraction);

    const uint64_t largest = index->max_buffer_bytes();
    const uint64_t ram = opts.ram_bytes;
    check(ram == 0 || ram >= largest,
          "the RAM budget for experts ({}) is smaller than one expert ({}); raise --ram-gb to at least {}",
          bytes_human(ram), bytes_human(largest), ram_gb_for(largest));
    const int k = std::max(1, layout.top_k);
    if (ram > 0 && ram < k * largest)
        log_warn(
            "the RAM budget for experts ({}) holds fewer than the {} experts a token uses in a layer ({} "
            "each): tokens are processed in several groups, which is slow; --ram-gb {} would hold them",
            bytes_human(ram), k, bytes_human(largest), ram_gb_for(k * largest));

    // The pinned hot set takes at most hot_fraction of the budget and of each layer's slots, and always
    // leaves room for the top_k experts of one token, so that pins never make a normal fetch fail.
    if (hot_enabled) {
        hot_cap = hot_cap_for(ram);
        const int slots = opts.slots_per_layer;
        pin_slots =
            slots == 0 ? INT_MAX : std::min(int(opts.hot_fraction * slots), slots - std::min(slots, k));
    }

    files.resize(ckpt.file_count());
    if (opts.source == ExpertSource::read && !ckpt.shapes_only())
        for (int f : index->files()) files[f] = std::make_unique<ReadFile>(ckpt.file_path(f), opts.direct_io);

    if (hot_enabled) {
        if (history.load(hot_path))
            log_debug("expert store: routing history loaded from {}", hot_path.string());
        refresh_hot_set();
    }
    log_debug("expert store: {} of routed experts in {} layers, {}, {} I/O threads",
              bytes_human(index->total_bytes()), index->n_layers(),
              opts.source == ExpertSource::mapped ? "used in place from the file mappings"
                                                  : "budget " + (ram ? bytes_human(ram) : "unlimited"),
              opts.io_threads);
}

uint64_t ExpertStore::Impl::hot_cap_for(uint64_t budget) const {
    return budget == 0 ? UINT64_MAX
                       : std::min(uint64_t(opts.hot_fraction * double(budget)),
                                  budget - std::min(budget, token_bytes()));
}

bool ExpertStore::Impl::budget_lower(const Entry& e, const std::string& why) {
    const uint64_t budget = cache.budget();
    const uint64_t lowered = std::max(token_bytes(), pool->allocated_bytes());
    if (budget != 0 && lowered >= budget) return false;
    log_warn(
        "expert store: reading expert {} of layer {}: {}; the RAM budget for experts is lowered from {} to "
        "{} "
        "and the read is tried again: fewer experts stay cached, tokens are the same",
        e.expert, e.layer, why, budget == 0 ? std::string("unlimited") : bytes_human(budget),
        bytes_human(lowered));
    cache.budget_lower(lowered);
    pool->cap_lower(lowered);
    if (hot_enabled) {
        hot_cap = hot_cap_for(lowered);
        refresh_hot_set();
    }
    ++budget_lowerings;
    return true;
}

void ExpertStore::Impl::check_request(int layer, std::span<const int> experts) const {
    check(layer >= 0 && layer < index->n_layers(), "expert store: layer {} is out of range [0, {})", layer,
          index->n_layers());
    check(index->has_experts(layer), "expert store: layer {} has no routed experts", layer);
    for (int e : experts)
        check(e >= 0 && e < index->n_experts(), "expert store: expert {} of layer {} is out of range [0, {})",
              e, layer, index->n_experts());
}

std::shared_ptr<Entry> ExpertStore::Impl::new_entry(int layer, int expert) {
    auto e = std::make_shared<Entry>();
    e->layer = layer;
    e->expert = expert;
    e->index = index;
    e->loc = &index->at(layer, expert);
    e->buffers.resize(e->loc->reads.size());
    e->nan_free.assign(e->loc->parts.size(), 0);
    e->reads_pending = static_cast<int>(e->loc->reads.size());
    e->pinned = hot[index->key(layer, expert)] != 0;
    return e;
}

void ExpertStore::Impl::add_reads(Entry* e, std::vector<PendingRead>& reads) {
    if (ckpt.shapes_only()) {  // nothing to read: the expert is its parts' shapes, ready at once
        e->reads_pending = 0;
        e->state = Entry::State::ready;
        return;
    }
    for (uint32_t r = 0; r < e->loc->reads.size(); ++r)
        reads.push_back(PendingRead{e->loc->reads[r].file, e->loc->reads[r].offset, e, r});
}

void ExpertStore::Impl::submit(std::vector<PendingRead>& reads) {
    std::sort(reads.begin(), reads.end(), [](const PendingRead& a, const PendingRead& b) {
        return std::pair(a.file, a.offset) < std::pair(b.file, b.offset);
    });
    std::vector<IoQueue::Job> jobs;
    jobs.reserve(reads.size());
    // A raw pointer is safe: the cache keeps a loading entry (it is never evictable) until its last read
    // has finished, and the I/O queue is joined before the cache is destroyed.
    for (const PendingRead& r : reads) {
        if (opts.read_issued) opts.read_issued(r.file, r.offset);
        jobs.push_back([this, e = r.entry, i = r.read] { run_read(e, i); });
    }
    io.submit(std::move(jobs));
    reads.clear();
}

namespace {

// Marks the F8_E4M3 parts that read `read` brought in and that hold no NaN code, while their bytes are in
// cache: the CPU matmul then leaves out its NaN fix (ExpertHandle::part_nan_free).
void parts_nan_check(ExpertHandle::Entry& e, uint32_t read, const ReadBuffer& buf) {
    for (size_t p = 0; p < e.loc->parts.size(); ++p) {
        const PartRef& part = e.loc->parts[p];
        if (part.read == read && part.info->dtype == DType::f8_e4m3)
            e.nan_free[p] =
                fp8_codes_nan_free(buf.data() + part.offset, static_cast<size_t>(part.info->nbytes));
    }
}

}  // namespace

void ExpertStore::Impl::run_read(Entry* e, uint32_t i) {
    const ReadRange& range = e->loc->reads[i];
    const bool mapped = opts.source == ExpertSource::mapped;
    ReadBuffer buf;
    std::string error;
    bool out_of_memory = false;
    const Timer reading;
    for (;;) {
        try {
            buf = mapped ? ReadBuffer::map(ckpt, range) : ReadBuffer::read(*files[range.file], range, pool);
            parts_nan_check(*e, i, buf);
        } catch (const OutOfMemory& ex) {
            std::lock_guard lock(mu);
            if (budget_lower(*e, ex.what())) continue;
            error = ex.what();
            out_of_memory = true;
        } catch (const std::exception& ex) {
            error = ex.what();
        }
        break;
    }

    const double seconds = reading.seconds();

    std::lock_guard lock(mu);
    if (seconds > kSlowReadSeconds && slow_reads++ == 0)
        log_warn(
            "expert store: reading {} of expert {} of layer {} took {:.1f} s: the disk is stalling; reads "
            "slower than {} s are counted (summary of coli run, coli_expert_slow_reads_total of coli serve)",
            bytes_human(range.length), e->expert, e->layer, seconds, kSlowReadSeconds);
    if (error.empty()) {
        e->buffers[i] = std::move(buf);
        // O_DIRECT reads whole blocks.
        const bool direct = !mapped && files[range.file]->has_direct();
        bytes_read += direct ? ReadFile::direct_bytes(range.length, range.offset) : range.length;
    } else if (e->error.empty()) {
        e->error = error;
        e->out_of_memory = out_of_memory;
    }
    ++reads_finished;
    read_done.notify_all();
    if (--e->reads_pending > 0) return;
    if (e->error.empty()) {
        e->state = Entry::State::ready;
        return;
    }
    e->state = Entry::State::failed;
    const bool unclaimed = cache.find(e->layer, e->expert).use_count() == 1;
    if (unclaimed)  // a prefetch nobody waits for; a fetch would report it
        log_warn("expert store: prefetch of expert {} of layer {} failed: {}", e->expert, e->layer, e->error);
    cache.remove(e);  // may destroy *e: the last use of it
}

void ExpertStore::Impl::refresh_hot_set() {
    if (!hot_enabled) return;
    hot = history.select([&](int l, int e) { return index->at(l, e).buffer_bytes; }, hot_cap, pin_slots);
    hot_experts = uint64_t(std::count(hot.begin(), hot.end(), 1));
    cache.set_pins(hot);
    records_since_refresh = 0;
}

void ExpertStore::Impl::fail_too_big(int layer, const std::vector<std::shared_ptr<Entry>>& held_for_request,
                                     const std::vector<int>& missing) const {
    uint64_t request = 0, request_held = 0;
    for (const auto& e : held_for_request) {
        request += e->loc->buffer_bytes;
        request_held += e->loc->buffer_bytes;
    }
    for (int x : missing) request += index->at(layer, x).buffer_bytes;
    const uint64_t others = cache.held_bytes() - std::min(cache.held_bytes(), request_held);
    const size_t n = held_for_request.size() + missing.size();
    const uint64_t budget = cache.budget();
    if (budget == 0 || others + request <= budget)
        fail(
            "expert store: layer {} needs {} experts at once, more than its {} cache slots can take beside "
            "its pinned and in-use experts; fetch at most max_resident() = {} at a time",
            layer, n, cache.slots_per_layer(), max_resident(layer));
    fail(
        "expert store: layer {} needs {} for {} experts at once, but the RAM budget for experts is {} "
        "and {} of it is held by pinned or in-use experts; raise --ram-gb to at least {} or fetch at "
        "most max_resident() = {} at a time",
        layer, bytes_human(request), n, bytes_human(budget), bytes_human(others),
        ram_gb_for(others + request), max_resident(layer));
}

ExpertStore::ExpertStore(const Checkpoint& ckpt, ExpertLayout layout, StoreOptions opts)
    : impl_(std::make_unique<Impl>(ckpt, std::move(layout), std::move(opts))) {}

ExpertStore::~ExpertStore() {
    if (!impl_ || !impl_->hot_enabled) return;
    bool unsaved;
    {
        std::lock_guard lock(impl_->mu);
        unsaved = impl_->history.unsaved() > 0;
    }
    // Only when this run learned something: a file left by another model stays as it was.
    if (!unsaved) return;
    try {
        hot_set_save();
    } catch (const std::exception& e) {  // a destructor must not throw; the history is only a hint
        log_warn("cannot save the routing history: {}", e.what());
    }
}

void ExpertStore::prefetch(int layer, std::span<const int> experts) {
    Impl& s = *impl_;
    s.check_request(layer, experts);
    std::lock_guard lock(s.mu);
    std::vector<int> missing;
    for (int x : experts) {
        if (const auto& e = s.cache.find(layer, x)) {
            s.cache.touch(e.get());  // needed soon: keep it from being the next victim
        } else if (std::find(missing.begin(), missing.end(), x) == missing.end()) {
            missing.push_back(x);
        }
    }
    std::vector<PendingRead> reads;
    for (int x : missing) {
        // Never waits and never goes over: what does not fit is left for fetch().
        if (!s.cache.make_room(layer, s.index->at(layer, x).buffer_bytes)) continue;
        auto e = s.new_entry(layer, x);
        s.add_reads(e.get(), reads);
        s.cache.insert(std::move(e));
    }
    s.submit(reads);
}

std::vector<ExpertHandle> ExpertStore::fetch(int layer, std::span<const int> experts) {
    Impl& s = *impl_;
    s.check_request(layer, experts);
    std::unique_lock lock(s.mu);

    // The request as a set: the entries it found (referenced from here on, so never evicted to make room
    // for the others) and the experts it must read.
    std::unordered_map<int, std::shared_ptr<Entry>> got;
    std::vector<std::shared_ptr<Entry>> found;
    std::vector<int> missing;
    for (int x : experts) {
        if (got.count(x) || std::find(missing.begin(), missing.end(), x) != missing.end()) continue;
        if (const auto& e = s.cache.find(layer, x)) {
            s.cache.touch(e.get());
            got[x] = e;
            found.push_back(e);
            ++s.hits;  // a read issued by prefetch counts as a hit even if it is still in flight
        } else {
            missing.push_back(x);
        }
    }
    s.misses += missing.size();

    s.sort_by_disk(layer, missing);  // the misses are read in disk order
    std::vector<PendingRead> reads;
    Timer waiting;
    for (size_t i = 0; i < missing.size(); ++i) {
        const int x = missing[i];
        while (!s.cache.make_room(layer, s.index->at(layer, x).buffer_bytes)) {
            if (!s.cache.has_unclaimed_reads()) {
                s.submit(reads);  // the reads already reserved are in the cache; let them land
                s.fail_too_big(layer, found, std::vector<int>(missing.begin() + i, missing.end()));
            }
            // Prefetched reads nobody waits for hold budget; once landed they can be evicted.
            s.submit(reads);
            waiting.reset();
            const uint64_t seen = s.reads_finished;
            s.read_done.wait(lock, [&] { return s.reads_finished != seen; });
            s.stall_seconds += waiting.seconds();
        }
        auto e = s.new_entry(layer, x);
        s.add_reads(e.get(), reads);
        got[x] = e;
        found.push_back(e);
        s.cache.insert(std::move(e));
    }
    s.submit(reads);

    s.wait_ready(lock, found, true);

    std::vector<ExpertHandle> handles;
    handles.reserve(experts.size());
    for (int x : experts) handles.emplace_back(got[x]);
    return handles;
}

void ExpertStore::Impl::wait_ready(std::unique_lock<std::mutex>& lock,
                                   const std::vector<std::shared_ptr<Entry>>& entries, bool count_stall) {
    const auto landed = [&] {
        return std::none_of(entries.begin(), entries.end(),
                            [](const auto& e) { return e->state == Entry::State::loading; });
    };
    if (!landed()) {
        const Timer waiting;
        read_done.wait(lock, landed);
        if (count_stall) stall_seconds += waiting.seconds();
    }
    for (const auto& e : entries) {
        if (e->state == Entry::State::ready) continue;
        const std::string what =
            fmt::format("expert store: cannot read expert {} of layer {}: {}", e->expert, e->layer, e->error);
        if (e->out_of_memory) throw OutOfMemory(what);
        throw Error(what);
    }
}

void ExpertStore::Impl::sort_by_disk(int layer, std::vector<int>& experts) const {
    std::sort(experts.begin(), experts.end(), [&](int a, int b) {
        const ReadRange& ra = index->at(layer, a).reads.front();
        const ReadRange& rb = index->at(layer, b).reads.front();
        return std::pair(ra.file, ra.offset) < std::pair(rb.file, rb.offset);
    });
}

ExpertStore::Preloaded ExpertStore::preload() {
    Impl& s = *impl_;
    std::unique_lock lock(s.mu);
    const uint64_t budget = s.cache.budget();
    const int slots = s.cache.slots_per_layer();
    std::vector<std::shared_ptr<Entry>> loading;
    std::vector<PendingRead> reads;
    bool full = false;
    for (int layer = 0; layer < s.index->n_layers() && !full; ++layer) {
        if (!s.index->has_experts(layer)) continue;
        std::vector<int> experts(s.index->n_experts());
        std::iota(experts.begin(), experts.end(), 0);
        s.sort_by_disk(layer, experts);
        for (int x : experts) {
            if (s.cache.find(layer, x)) continue;
            if (slots > 0 && s.cache.layer_count(layer) >= slots) break;  // this layer's slots are taken
            const uint64_t bytes = s.index->at(layer, x).buffer_bytes;
            if (budget > 0 && s.cache.charged_bytes() + bytes > budget) {  // never evicts what it read
                full = true;
                break;
            }
            auto e = s.new_entry(layer, x);
            s.add_reads(e.get(), reads);
            loading.push_back(e);
            s.cache.insert(std::move(e));
        }
    }
    s.submit(reads);
    s.wait_ready(lock, loading, false);  // preloading is not a stall: no token waits
    Preloaded done;
    for (int layer = 0; layer < s.index->n_layers(); ++layer)
        if (s.index->has_experts(layer)) done.of_experts += s.index->n_experts();
    for (const auto& e : loading) {
        ++done.experts;
        done.bytes += e->loc->bytes;
    }
    return done;
}

int ExpertStore::Impl::max_resident(int layer) const {
    if (!index->has_experts(layer)) return 1;
    // What is left beside the largest pinned set there can be, in bytes and in slots. Pins are lazily
    // loaded, so any fewer than that only leave more room.
    int64_t n = index->n_experts();
    if (opts.slots_per_layer > 0) n = std::min<int64_t>(n, opts.slots_per_layer - pin_slots);
    if (const uint64_t budget = cache.budget(); budget > 0)
        n = std::min<int64_t>(n,
                              int64_t((budget - std::min(budget, hot_cap)) / index->max_buffer_bytes(layer)));
    return static_cast<int>(std::max<int64_t>(1, n));
}

int ExpertStore::max_resident(int layer) const {
    const Impl& s = *impl_;
    check(layer >= 0 && layer < s.index->n_layers(), "expert store: layer {} is out of range [0, {})", layer,
          s.index->n_layers());
    std::lock_guard lock(s.mu);  // the budget may be lowered by a failed allocation
    return s.max_resident(layer);
}

bool ExpertStore::layer_held(int layer) const {
    const Impl& s = *impl_;
    s.check_request(layer, {});
    std::lock_guard lock(s.mu);
    return s.cache.layer_count(layer) == s.index->n_experts();
}

void ExpertStore::routing_record(int layer, std::span<const int> experts) {
    Impl& s = *impl_;
    s.check_request(layer, experts);
    std::lock_guard lock(s.mu);
    s.routing.record(layer, experts);
    s.history.record(layer, experts);
    if (s.hot_enabled && ++s.records_since_refresh >= kHotSetRefreshRecords) s.refresh_hot_set();
}

void ExpertStore::moe_time_record(double seconds) {
    Impl& s = *impl_;
    std::lock_guard lock(s.mu);
    s.moe_seconds += seconds;
    ++s.moe_calls;
}

double ExpertStore::read_in_flight_seconds() const {
    return impl_->io.oldest_running_seconds();
}

StoreStats ExpertStore::stats() const {
    const Impl& s = *impl_;
    StoreStats st;
    st.read_seconds = s.io.busy_seconds();
    std::lock_guard lock(s.mu);
    st.hits = s.hits;
    st.misses = s.misses;
    st.evictions = s.cache.evictions();
    st.bytes_read = s.bytes_read;
    st.mapped = s.opts.source == ExpertSource::mapped;
    st.stall_seconds = s.stall_seconds;
    st.slow_reads = s.slow_reads;
    st.moe_seconds = s.moe_seconds;
    st.moe_calls = s.moe_calls;
    st.cached_bytes = s.cache.charged_bytes();
    st.budget_bytes = s.cache.budget();
    st.budget_lowerings = s.budget_lowerings;
    st.kept_bytes = s.pool->kept_bytes();
    st.pinned_experts = s.hot_experts;
    st.distinct_per_layer = s.routing.distinct_per_layer();
    st.consecutive_shared = s.routing.consecutive_shared();
    st.tokens_routed = s.routing.records();
    return st;
}

uint64_t ExpertStore::expert_bytes(int layer, int expert) const {
    const Impl& s = *impl_;
    s.check_request(layer, std::span<const int>(&expert, 1));
    return s.index->at(layer, expert).bytes;
}

uint64_t ExpertStore::total_expert_bytes() const {
    return impl_->index->total_bytes();
}

const ExpertLayout& ExpertStore::layout() const {
    return impl_->layout;
}

void ExpertStore::hot_set_save() const {
    Impl& s = *impl_;
    if (!s.hot_enabled) return;
    std::lock_guard lock(s.mu);
    s.history.save(s.hot_path);
}

// ExpertHandle

int ExpertHandle::layer() const {
    return entry_->layer;
}
int ExpertHandle::expert() const {
    return entry_->expert;
}
size_t ExpertHandle::part_count() const {
    return entry_->loc->parts.size();
}

std::span<const uint8_t> ExpertHandle::part(size_t i) const {
    check(i < part_count(), "expert store: part {} of an expert with {} parts", i, part_count());
    const PartRef& p = entry_->loc->parts[i];
    if (entry_->buffers[p.read].data() == nullptr) return {};  // a checkpoint of shapes only
    return {entry_->buffers[p.read].data() + p.offset, static_cast<size_t>(p.info->nbytes)};
}

bool ExpertHandle::part_nan_free(size_t i) const {
    check(i < part_count(), "expert store: part {} of an expert with {} parts", i, part_count());
    return entry_->nan_free[i] != 0;
}

const TensorInfo& ExpertHandle::part_info(size_t i) const {
    check(i < part_count(), "expert store: part {} of an expert with {} parts", i, part_count());
    return *entry_->loc->parts[i].info;
}

}  // namespace coli
