#include "runtime/prefix_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fnv1a.h"
#include "core/log.h"
#include "io/atomic_write.h"
#include "io/json.h"
#include "runtime/engine.h"

namespace coli {

namespace {

constexpr char kMagic[8] = {'c', 'o', 'l', 'i', 'p', 'f', 'x', '\0'};
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr const char* kFileExtension = ".prefix";

// magic, version, byte-order mark, fingerprint, n_ids, n_past, n_tensors
constexpr size_t kHeaderBytes = sizeof kMagic + 2 * sizeof(uint32_t) + 4 * sizeof(uint64_t);
constexpr size_t kShapeBytes = 2 * sizeof(int64_t);  // per tensor: rows, cols
constexpr size_t kChecksumBytes = sizeof(uint64_t);

// Writes values to a stream and hashes what it wrote.
class HashingWriter {
public:
    explicit HashingWriter(std::ostream& out) : out_(out) {}
    void put(const void* p, size_t n) {
        hash_.bytes(p, n);
        out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    }
    template <typename T>
    void value(T v) {
        put(&v, sizeof v);
    }
    uint64_t hash() const { return hash_.value(); }

private:
    std::ostream& out_;
    Fnv1a hash_;
};

// Reads values from a file's bytes, never past their end.
class Reader {
public:
    explicit Reader(std::string_view bytes) : bytes_(bytes) {}
    bool get(void* p, size_t n) {
        if (n > bytes_.size() - pos_) return false;
        std::memcpy(p, bytes_.data() + pos_, n);
        pos_ += n;
        return true;
    }
    template <typename T>
    bool value(T& v) {
        return get(&v, sizeof v);
    }
    size_t left() const { return bytes_.size() - pos_; }
    size_t pos() const { return pos_; }

private:
    std::string_view bytes_;
    size_t pos_ = 0;
};

}  // namespace

std::shared_ptr<PrefixEntry> prefix_file_read(const std::filesystem::path& path, uint64_t fingerprint,
                                              std::string* why) {
    std::string bytes;
    try {
        bytes = file_read_text(path);
    } catch (const Error& e) {
        *why = e.what();
        return nullptr;
    }
    const auto refuse = [&](std::string reason) {
        *why = std::move(reason);
        return nullptr;
    };
    Reader r(bytes);
    char magic[sizeof kMagic];
    uint32_t version = 0, mark = 0;
    uint64_t print = 0, n_ids = 0, n_tensors = 0;
    int64_t n_past = 0;
    if (!r.get(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0)
        return refuse("not a colibri prefix-cache file");
    if (!r.value(version) || !r.value(mark) || !r.value(print) || !r.value(n_ids) || !r.value(n_past) ||
        !r.value(n_tensors))
        return refuse("cut short in its header");
    if (mark != kByteOrderMark) return refuse("written on a machine of the other byte order");
    if (version != kPrefixCacheFormatVersion)
        return refuse(fmt::format("format version {} (this build reads version {})", version,
                                  kPrefixCacheFormatVersion));
    if (print != fingerprint)
        return refuse(
            fmt::format("it was written for another model, backend or state layout (fingerprint "
                        "{:016x}, this one {:016x})",
                        print, fingerprint));
    // Every count is checked against the bytes left before anything is sized by it.
    if (n_ids == 0 || static_cast<uint64_t>(n_past) != n_ids || n_ids > r.left() / sizeof(int32_t) ||
        n_tensors > r.left() / kShapeBytes)
        return refuse("malformed header");
    auto e = std::make_shared<PrefixEntry>();
    e->state.n_past = n_past;
    e->state.tensors.resize(n_tensors);
    uint64_t floats = 0;
    for (SnapshotTensor& t : e->state.tensors) {
        if (!r.value(t.rows) || !r.value(t.cols)) return refuse("cut short in its tensor shapes");
        if (t.rows < 0 || t.cols < 0 ||
            (t.cols > 0 && uint64_t(t.rows) > r.left() / sizeof(float) / uint64_t(t.cols)))
            return refuse("malformed tensor shape");
        floats += uint64_t(t.rows) * uint64_t(t.cols);
        if (floats > r.left() / sizeof(float))
            return refuse(fmt::format("{} bytes long, fewer than its tensor shapes say", bytes.size()));
    }
    if (r.left() != n_ids * sizeof(int32_t) + floats * sizeof(float) + kChecksumBytes)
        return refuse(
            fmt::format("{} bytes long where its header says {}", bytes.size(),
                        r.pos() + n_ids * sizeof(int32_t) + floats * sizeof(float) + kChecksumBytes));
    e->ids.resize(n_ids);
    r.get(e->ids.data(), n_ids * sizeof(int32_t));
    for (SnapshotTensor& t : e->state.tensors) {
        t.data.resize(size_t(t.rows * t.cols));
        r.get(t.data.data(), t.data.size() * sizeof(float));
    }
    Fnv1a hash;
    hash.bytes(bytes.data(), r.pos());
    uint64_t checksum = 0;
    r.value(checksum);
    if (checksum != hash.value()) return refuse("damaged (checksum mismatch)");
    return e;
}

PrefixCache::PrefixCache(PrefixCacheOptions opts, uint64_t fingerprint)
    : opts_(std::move(opts)), fingerprint_(fingerprint) {
    if (enabled() && !opts_.dir.empty()) files_load();
}

void PrefixCache::files_load() {
    std::error_code ec;
    if (!std::filesystem::is_directory(opts_.dir, ec)) return;  // the first run: created when first written
    std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
    for (const auto& f : std::filesystem::directory_iterator(opts_.dir, ec))
        if (f.is_regular_file(ec) && f.path().extension() == kFileExtension)
            files.emplace_back(f.last_write_time(ec), f.path());
    if (ec) log_warn("prefix cache: cannot list {}: {}", opts_.dir.string(), ec.message());
    // Oldest first, so that where they exceed the budget the oldest are evicted (and their files deleted).
    std::sort(files.begin(), files.end());
    for (const auto& [time, path] : files) {
        std::string why;
        std::shared_ptr<PrefixEntry> e = prefix_file_read(path, fingerprint_, &why);
        if (e && e->bytes() <= opts_.ram_bytes && !holds(e->ids)) {
            add(std::move(e), false);
            ++stats_.files_loaded;
            continue;
        }
        if (e) continue;  // this model's, but larger than the whole budget or a duplicate: left as it is
        log_warn("ignoring the prefix-cache file {}: {}", path.string(), why);
        ++stats_.files_refused;
    }
}

std::filesystem::path PrefixCache::file_of(std::span<const int32_t> ids) const {
    Fnv1a hash;
    hash.bytes(ids.data(), ids.size_bytes());
    return opts_.dir / fmt::format("{:016x}-{:016x}{}", fingerprint_, hash.value(), kFileExtension);
}

void PrefixCache::file_write(const PrefixEntry& e) {
    const auto write = [&](std::ostream& out) {
        HashingWriter w(out);
        w.put(kMagic, sizeof kMagic);
        w.value(kPrefixCacheFormatVersion);
        w.value(kByteOrderMark);
        w.value(fingerprint_);
        w.value(uint64_t(e.ids.size()));
        w.value(e.state.n_past);
        w.value(uint64_t(e.state.tensors.size()));
        for (const SnapshotTensor& t : e.state.tensors) {
            w.value(t.rows);
            w.value(t.cols);
        }
        w.put(e.ids.data(), e.ids.size() * sizeof(int32_t));
        for (const SnapshotTensor& t : e.state.tensors) w.put(t.data.data(), t.data.size() * sizeof(float));
        const uint64_t checksum = w.hash();
        out.write(reinterpret_cast<const char*>(&checksum), sizeof checksum);
    };
    const std::string failed = file_write_atomic(file_of(e.ids), write);
    if (failed.empty()) return;
    if (!write_warned_) log_warn("prefix cache: cannot write {}; entries are kept in RAM only", failed);
    write_warned_ = true;
}

std::shared_ptr<const PrefixEntry> PrefixCache::longest_prefix(std::span<const int32_t> ids, int64_t held) {
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const std::vector<int32_t>& e = (*it)->ids;
        if (e.size() < ids.size() && static_cast<int64_t>(e.size()) > held &&
            (best == entries_.end() || e.size() > (*best)->ids.size()) &&
            std::equal(e.begin(), e.end(), ids.begin()))
            best = it;
    }
    if (best == entries_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, best);
    return entries_.front();
}

int64_t PrefixCache::shared_tokens(std::span<const int32_t> ids) const {
    size_t most = 0;
    for (const auto& e : entries_) {
        const auto m = std::mismatch(e->ids.begin(), e->ids.end(), ids.begin(), ids.end());
        most = std::max(most, size_t(m.first - e->ids.begin()));
    }
    return static_cast<int64_t>(most);
}

bool PrefixCache::holds(std::span<const int32_t> ids) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) {
        return std::equal(e->ids.begin(), e->ids.end(), ids.begin(), ids.end());
    });
}

bool PrefixCache::worth_keeping(std::span<const int32_t> ids) const {
    size_t covered = 0;  // the longest entry that is a prefix of ids (or ids itself)
    for (const auto& e : entries_)
        if (e->ids.size() <= ids.size() && std::equal(e->ids.begin(), e->ids.end(), ids.begin()))
            covered = std::max(covered, e->ids.size());
    return static_cast<int64_t>(ids.size() - covered) >= opts_.min_tokens;
}

void PrefixCache::add(std::shared_ptr<const PrefixEntry> e, bool write_file) {
    while (!entries_.empty() && stats_.bytes_held + e->bytes() > opts_.ram_bytes) {
        const std::shared_ptr<const PrefixEntry>& last = entries_.back();
        stats_.bytes_held -= last->bytes();
        file_remove(last->ids);
        entries_.pop_back();
        ++stats_.evictions;
    }
    stats_.bytes_held += e->bytes();
    ++stats_.inserts;
    entries_.push_front(e);
    stats_.entries = entries_.size();
    if (write_file && !opts_.dir.empty()) file_write(*e);
}

void PrefixCache::drop(const std::shared_ptr<const PrefixEntry>& e) {
    stats_.bytes_held -= e->bytes();
    file_remove(e->ids);
    entries_.remove(e);
    stats_.entries = entries_.size();
}

void PrefixCache::file_remove(std::span<const int32_t> ids) const {
    if (opts_.dir.empty()) return;
    std::error_code ignored;
    std::filesystem::remove(file_of(ids), ignored);
}

void PrefixCache::count(const PrefixEntry* e) {
    if (!e) {
        ++stats_.misses;
        return;
    }
    ++stats_.hits;
    stats_.tokens_reused += e->ids.size();
    stats_.bytes_restored += e->state.bytes();
}

void PrefixCache::insert(Ops& ops, ModelState& state, std::span<const int32_t> ids) {
    const auto n = static_cast<int64_t>(ids.size());
    if (!enabled() || !worth_keeping(ids)) return;
    check(state.n_past == n, "prefix cache: a state of {} tokens kept for {} ids", state.n_past, n);
    auto e = std::make_shared<PrefixEntry>();
    e->ids.assign(ids.begin(), ids.end());
    e->state = state_snapshot(ops, state);
    if (e->bytes() <= opts_.ram_bytes) add(std::move(e), true);
}

void PrefixCache::insert(Session& session, std::span<const int32_t> ids) {
    insert(session.model().ops(), session.state(), ids);
}

int64_t PrefixCache::restore(Ops& ops, ModelState& state, std::span<const int32_t> ids, int64_t held) {
    if (!enabled()) return held;
    std::shared_ptr<const PrefixEntry> hit = longest_prefix(ids, held);
    if (hit) {
        try {
            state_restore(ops, hit->state, state);
            held = static_cast<int64_t>(hit->ids.size());
        } catch (const Error& e) {  // checked before anything is written: state is as it was
            log_warn("prefix cache: an entry of {} tokens does not fit this state ({}); dropped",
                     hit->ids.size(), e.what());
            drop(hit);
            hit = nullptr;
        }
    }
    count(hit.get());
    return held;
}

int64_t PrefixCache::next_keep(std::span<const int32_t> ids, int64_t held, int64_t boundary) const {
    const auto n = static_cast<int64_t>(ids.size());
    // The prefix shared with an entry ends at the last token at most: an entry as long as ids (the same
    // prompt again) cannot be restored, the last token being fed for its logits.
    std::vector<int64_t> points = {boundary, std::min(shared_tokens(ids), n - 1)};
    std::sort(points.begin(), points.end());
    for (const int64_t p : points)
        if (p > held && p < n && worth_keeping(ids.first(size_t(p)))) return p;
    return 0;
}

PrefixFill PrefixCache::prefill(Session& session, std::span<const int32_t> ids, int64_t held,
                                int64_t boundary) {
    if (!enabled()) return {held, held};
    std::shared_ptr<const PrefixEntry> hit = longest_prefix(ids, held);
    if (hit) {
        try {
            session.restore(hit->state);
            held = static_cast<int64_t>(hit->ids.size());
        } catch (const Error& e) {  // a state of a shorter context, say: computed instead
            log_warn("prefix cache: an entry of {} tokens does not fit this state ({}); dropped",
                     hit->ids.size(), e.what());
            drop(hit);
            hit = nullptr;
            held = 0;  // the session was reset
        }
    }
    count(hit.get());
    const int64_t reused = held;
    for (int64_t p; (p = next_keep(ids, held, boundary)) > 0; held = p) {
        session.forward(ids.subspan(size_t(held), size_t(p - held)), false);
        insert(session, ids.first(size_t(p)));
    }
    return {held, reused};
}

uint64_t prefix_cache_fingerprint(Engine& engine, ModelState& state) {
    Fnv1a hash;
    hash.u64(kPrefixCacheFormatVersion);
    const Checkpoint& ckpt = engine.checkpoint();
    hash.str(ckpt.config().dump());
    for (int f = 0; f < ckpt.file_count(); ++f) {
        const std::filesystem::path& path = ckpt.file_path(f);
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) {
            hash.u64(uint64_t(st.st_size));
            hash.u64(uint64_t(st.st_mtim.tv_sec));
            hash.u64(uint64_t(st.st_mtim.tv_nsec));
        }
        hash.str(path.filename().string());
    }
    for (const TensorInfo& t : ckpt.tensors()) {
        hash.str(t.name);
        hash.str(std::string(dtype_name(t.dtype)));
        for (int64_t d : t.shape) hash.u64(uint64_t(d));
        hash.u64(uint64_t(t.file));
        hash.u64(t.offset);
    }
    hash.u64(uint64_t(engine.options().dense_bits));
    hash.str(std::string(engine.ops().backend().name()));
    for (const StateTensor& t : state.tensors()) {
        hash.u64(uint64_t(t.tensor->cols()));
        hash.u64(uint64_t(t.positions_per_row));
        // Rows that do not follow the positions (a ring, a recurrent state) are copied whole.
        hash.u64(t.positions_per_row == 0 ? uint64_t(t.tensor->rows()) : 0);
    }
    return hash.value();
}

}  // namespace coli
