// The prefix cache: model states at the end of prompts (and of their shared parts, such as a long system
// message) kept in RAM under a byte budget, least recently used first out, and restored when a later
// prompt starts with the same tokens, so that those are not computed again. Optionally each entry is also
// a file in a directory (--cache-dir), read back at the next start; a file of another model, another
// format or a different layout, and one cut short or damaged, is refused with a warning, never misread.
// Keyed by token ids: entries are whole prefixes, restored at exactly their length (a recurrent state
// cannot be cut shorter). Used by one thread, the one that runs the model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "runtime/state_snapshot.h"

namespace coli {

class Engine;

// Version of the file format below; a file of another version is refused.
inline constexpr uint32_t kPrefixCacheFormatVersion = 1;

// The fewest tokens an entry adds by default to the longest entry it extends (to nothing, when none). A
// split prefill (to copy the state at a shared prefix) costs one more pass over the layers' weights, a
// decode step's expert reads on a model streamed from disk; so few tokens cost less than that to compute
// again, and are not worth an entry that holds the shorter one's rows a second time.
inline constexpr int64_t kPrefixCacheMinTokens = 32;

struct PrefixCacheOptions {
    uint64_t ram_bytes = 0;     // budget of the snapshots held; 0: no prefix cache
    std::filesystem::path dir;  // where entries are also kept as files, read back at start; empty: none
    int64_t min_tokens = kPrefixCacheMinTokens;  // the fewest tokens an entry adds to the one it extends
};

// What the cache did, for /metrics and the run's statistics.
struct PrefixCacheStats {
    uint64_t hits = 0;            // prompts that restored a cached prefix
    uint64_t misses = 0;          // prompts that found none to restore
    uint64_t tokens_reused = 0;   // prompt tokens restored instead of computed
    uint64_t bytes_restored = 0;  // snapshot bytes written back into states
    uint64_t entries = 0;         // entries held now
    uint64_t bytes_held = 0;      // their snapshots' bytes
    uint64_t inserts = 0;         // entries added
    uint64_t evictions = 0;       // entries dropped for the budget
    uint64_t files_loaded = 0;    // entries read back from --cache-dir at start
    uint64_t files_refused = 0;   // files there refused (another model or format, damaged), each warned of
};

// Where PrefixCache::prefill left a session.
struct PrefixFill {
    int64_t held = 0;    // tokens of the prompt the session's state holds (fewer than the prompt)
    int64_t reused = 0;  // of those, the tokens it did not compute: restored, or held before
};

// A state at the end of a token prefix.
struct PrefixEntry {
    std::vector<int32_t> ids;  // the prefix
    StateSnapshot state;       // the state after it (state.n_past == ids.size())
    uint64_t bytes() const { return state.bytes() + ids.size() * sizeof(int32_t); }
};

// File layout (host byte order, little-endian in practice; the order mark refuses another):
//   magic "colipfx\0", u32 version, u32 byte-order mark 0x01020304, u64 fingerprint, u64 n_ids, i64 n_past,
//   u64 n_tensors, n_tensors x (i64 rows, i64 cols), i32 ids[n_ids], f32 data of each tensor [rows, cols],
//   u64 FNV-1a of every byte before it.
class PrefixCache {
public:
    // fingerprint: what the snapshots depend on (prefix_cache_fingerprint). Reads the directory's entry
    // files of this fingerprint, oldest first, so that where they exceed the budget the oldest are evicted
    // (their files deleted); refuses every other file with one warning, leaving it as it is.
    PrefixCache(PrefixCacheOptions opts, uint64_t fingerprint);

    bool enabled() const { return opts_.ram_bytes > 0; }

    // Brings session to a prefix of ids, ready for generation: restores the longest entry that is a prefix
    // of ids shorter than ids (the last token is always fed, for its logits) where it is longer than the
    // held tokens the session already has (a prefix of ids); then feeds ids up to each point worth an entry,
    // keeping its state: `boundary` (the end of a chat's system message, say; 0: none) and the end of the
    // prefix ids share with an entry (so that the next prompt sharing it restores it). Returns the tokens
    // of ids the session's state now holds (fewer than ids.size()) and how many of them were reused.
    PrefixFill prefill(Session& session, std::span<const int32_t> ids, int64_t held, int64_t boundary);

    // Keeps session's state as the state after ids (its n_past == ids.size()) unless ids add fewer than
    // min_tokens to the longest entry they extend (an entry of ids itself: none) or it is larger than the
    // budget; evicts the least recently used entries to make room.
    void insert(Session& session, std::span<const int32_t> ids);

    // The same on a model state that is not a session's (the server's batch slots, each fed in chunks):
    // restore() writes the entry prefill() would restore into state, which holds `held` tokens of ids, and
    // returns the tokens it holds then (held when none was restored; an entry that does not fit state is
    // dropped with a warning, state left as it was); next_keep() is the next point after held where
    // prefill() would keep the state (0: none before the last token), where a chunk should end and
    // insert() be called.
    int64_t restore(Ops& ops, ModelState& state, std::span<const int32_t> ids, int64_t held);
    int64_t next_keep(std::span<const int32_t> ids, int64_t held, int64_t boundary) const;
    void insert(Ops& ops, ModelState& state, std::span<const int32_t> ids);

    const PrefixCacheStats& stats() const { return stats_; }

private:
    using Entries = std::list<std::shared_ptr<const PrefixEntry>>;  // most recently used first

    // The longest entry that is a proper prefix of ids and longer than held, moved to the front; null when
    // none.
    std::shared_ptr<const PrefixEntry> longest_prefix(std::span<const int32_t> ids, int64_t held);
    // Counts a prompt's hit (tokens restored from entry e) or, with e null, its miss.
    void count(const PrefixEntry* e);
    // The most tokens ids shares with one entry's ids from the start.
    int64_t shared_tokens(std::span<const int32_t> ids) const;
    bool holds(std::span<const int32_t> ids) const;
    // Whether ids hold at least min_tokens more than the longest entry they extend (all of them when none).
    bool worth_keeping(std::span<const int32_t> ids) const;
    void add(std::shared_ptr<const PrefixEntry> e, bool write_file);  // evicts to fit; e must fit
    void drop(const std::shared_ptr<const PrefixEntry>& e);           // and its file
    std::filesystem::path file_of(std::span<const int32_t> ids) const;
    void file_remove(std::span<const int32_t> ids) const;
    void file_write(const PrefixEntry& e);
    void files_load();

    const PrefixCacheOptions opts_;
    const uint64_t fingerprint_;
    Entries entries_;            // the entries held
    PrefixCacheStats stats_;     // what it did
    bool write_warned_ = false;  // a directory that cannot be written is warned of once
};

// Identifies what a state depends on: the model's config.json, every tensor of the checkpoint (name,
// dtype, shape, offset) and its files (name, size, modification time), how dense weights are held
// (--dense-bits), the backend (backends agree only to rounding, and the tokens must not depend on the
// cache), the tensors of state (one of the engine's model: their number, widths, rows per position) and
// the file format's version.
uint64_t prefix_cache_fingerprint(Engine& engine, ModelState& state);

// Reads one entry file; returns null with the reason in *why when it is not an entry of this fingerprint
// or is cut short or damaged. For the cache and its tests.
std::shared_ptr<PrefixEntry> prefix_file_read(const std::filesystem::path& path, uint64_t fingerprint,
                                              std::string* why);

}  // namespace coli
