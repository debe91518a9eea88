#include "text/bpe.h"

#include <queue>

#include "core/error.h"

namespace coli::text {

namespace {

// A symbol of the word being merged: a run of bytes that is one token. Merging keeps the left symbol
// and kills the right one.
struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;      // -1 at the ends
    uint32_t length;   // 0 once merged away
    uint32_t version;  // bumped on every change, so that stale heap entries can be recognized
};

// Pieces up to this many symbols find the best pair by scanning (no heap, no allocation per merge);
// longer ones (CJK runs, long numbers, whitespace runs) use a heap so that merging stays O(n log n).
constexpr size_t kScanLimit = 48;

struct Candidate {
    int32_t rank;
    int32_t left;  // symbol index: equal ranks merge leftmost first
    int32_t merged;
    uint32_t left_version;
    uint32_t right_version;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

class Merger {
public:
    explicit Merger(const BpeModel& model) : model_(model) {}

    std::optional<Merge> pair_merge(const Symbol& a, const Symbol& b) const {
        const Merge* m = model_.merges.find(a.id, b.id);
        if (!m) return std::nullopt;
        return *m;
    }

    void run(std::vector<Symbol>& syms) {
        if (syms.size() <= kScanLimit)
            run_scan(syms);
        else
            run_heap(syms);
    }

private:
    void merge_into(std::vector<Symbol>& syms, int32_t left, int32_t merged) {
        Symbol& l = syms[left];
        Symbol& r = syms[l.next];
        l.id = merged;
        l.length += r.length;
        r.length = 0;
        ++l.version;
        ++r.version;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = left;
    }

    void run_scan(std::vector<Symbol>& syms) {
        // rank[i]: the merge of symbol i with its next, cached and refreshed around each merge.
        std::array<Merge, kScanLimit> pair{};
        constexpr Merge kNone{-1, -1};
        auto refresh = [&](int32_t i) {
            if (i < 0 || syms[i].next < 0) {
                if (i >= 0) pair[i] = kNone;
                return;
            }
            auto m = pair_merge(syms[i], syms[syms[i].next]);
            pair[i] = m ? *m : kNone;
        };
        for (size_t i = 0; i < syms.size(); ++i) refresh(static_cast<int32_t>(i));
        for (;;) {
            int32_t best = -1;
            for (int32_t i = 0; i >= 0; i = syms[i].next)
                if (pair[i].rank >= 0 && (best < 0 || pair[i].rank < pair[best].rank)) best = i;
            if (best < 0) return;
            merge_into(syms, best, pair[best].merged);
            refresh(best);
            refresh(syms[best].prev);
        }
    }

    void run_heap(std::vector<Symbol>& syms) {
        std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
        auto push = [&](int32_t i) {
            if (i < 0 || syms[i].next < 0) return;
            const Symbol& r = syms[syms[i].next];
            if (auto m = pair_merge(syms[i], r))
                heap.push({m->rank, i, m->merged, syms[i].version, r.version});
        };
        for (size_t i = 0; i < syms.size(); ++i) push(static_cast<int32_t>(i));
        while (!heap.empty()) {
            Candidate c = heap.top();
            heap.pop();
            const Symbol& l = syms[c.left];
            if (l.length == 0 || l.version != c.left_version || l.next < 0 ||
                syms[l.next].version != c.right_version)
                continue;  // stale: one side changed since this pair was ranked
            merge_into(syms, c.left, c.merged);
            push(c.left);
            push(syms[c.left].prev);
        }
    }

    const BpeModel& model_;
};

}  // namespace

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
    if (whole_piece_first) {
        if (auto id = bytes_to_id.find(piece)) {
            out.push_back(*id);
            return;
        }
    }
    if (piece.size() == 1 && byte_ids[static_cast<uint8_t>(piece[0])] >= 0) {
        out.push_back(byte_ids[static_cast<uint8_t>(piece[0])]);
        return;
    }
    thread_local std::vector<Symbol> syms;
    syms.clear();
    for (size_t i = 0; i < piece.size(); ++i) {
        auto byte = static_cast<uint8_t>(piece[i]);
        int32_t id = byte_ids[byte];
        if (id < 0) fail("tokenizer: the byte 0x{:02x} has no token in the vocab", byte);
        auto index = static_cast<int32_t>(i);
        syms.push_back({id, index - 1, i + 1 < piece.size() ? index + 1 : -1, 1, 0});
    }
    Merger(*this).run(syms);
    for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

}  // namespace coli::text
