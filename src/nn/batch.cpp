#include "nn/batch.h"

namespace coli {

Tensor per_segment(Ops& ops, Batch batch, std::initializer_list<Tensor> inputs, const SegmentFn& f) {
    check(!batch.empty(), "per_segment: an empty batch");
    if (batch.size() == 1) return f(batch[0], std::span<const Tensor>(inputs.begin(), inputs.size()));
    std::vector<Tensor> outs;
    outs.reserve(batch.size());
    std::vector<Tensor> rows(inputs.size());
    for (const Segment& s : batch) {
        size_t i = 0;
        for (const Tensor& t : inputs) rows[i++] = t.empty() ? t : ops.slice_rows(t, s.row0, s.rows);
        outs.push_back(f(s, rows));
    }
    return ops.concat_rows(outs);
}

Tensor segment_last_rows(Ops& ops, Batch batch, const Tensor& x, std::span<const int64_t> counts) {
    check(counts.size() == batch.size(), "segment_last_rows: {} counts for {} segments", counts.size(),
          batch.size());
    std::vector<Tensor> last;
    last.reserve(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
        const Segment& s = batch[i];
        check(counts[i] >= 1 && counts[i] <= s.rows, "segment_last_rows: {} of {} rows", counts[i], s.rows);
        last.push_back(ops.slice_rows(x, s.row0 + s.rows - counts[i], counts[i]));
    }
    return ops.concat_rows(last);
}

}  // namespace coli
