// A batch of sequences in one forward pass (the server's continuous batching). Their rows are stacked:
// every step that treats rows alike (norms, projections, routing, experts) runs once over all of them, so
// an expert that several sequences route to is read and run once; the steps that read or write a
// sequence's own caches (rope at its positions, attention, recurrent states, compressors) run once per
// sequence on its rows. Each row's result is the one it has when its sequence runs alone.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

#include "backend/ops.h"

namespace coli {

// One sequence's rows in a batch.
struct Segment {
    int64_t row0 = 0;  // its first row in the batch's activations
    int64_t rows = 0;  // its token count in this pass
    int64_t pos0 = 0;  // the position of its first row (the tokens its caches already hold)
    int seq = 0;       // which sequence: the index of its state in the caller's list
};

// The segments of a pass, in row order, covering every row.
using Batch = std::span<const Segment>;

// What runs on one segment: its rows of each input, in the order given; returns its output rows.
using SegmentFn = std::function<Tensor(const Segment&, std::span<const Tensor>)>;

// Runs f on each segment's rows of the inputs and stacks the outputs in row order ([rows, out cols]).
// One segment: f sees the inputs themselves, nothing is copied.
Tensor per_segment(Ops& ops, Batch batch, std::initializer_list<Tensor> inputs, const SegmentFn& f);

// The last counts[i] rows of each segment i, stacked.           x: [rows, d]; returns [sum of counts, d]
Tensor segment_last_rows(Ops& ops, Batch batch, const Tensor& x, std::span<const int64_t> counts);

}  // namespace coli
