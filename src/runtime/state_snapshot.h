// A model's state copied to the host at n_past tokens and written back into a state of the same model:
// what the prefix cache keeps. Written once for every family: each state lists its tensors and how their
// rows follow the positions (StateTensor), and only the rows that hold something at n_past are copied.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "models/model.h"

namespace coli {

// One state tensor's filled rows.
struct SnapshotTensor {
    int64_t rows = 0;         // rows copied: the first rows of the state's tensor
    int64_t cols = 0;         // the tensor's width, checked against the state on restore
    std::vector<float> data;  // [rows, cols]
};

struct StateSnapshot {
    int64_t n_past = 0;                   // tokens the state had seen
    std::vector<SnapshotTensor> tensors;  // in the order of ModelState::tensors()

    uint64_t bytes() const;  // host bytes of the data
};

// Rows of t that hold something after n_past tokens (all of them for positions_per_row 0).
int64_t state_rows(const StateTensor& t, int64_t n_past);

// Copies state's filled rows to the host.
StateSnapshot state_snapshot(Ops& ops, ModelState& state);

// Writes s into state's tensors in place (of the same model; their other rows are left as they are, and a
// forward never reads them before writing them) and sets its n_past. Throws coli::Error when the tensors
// differ in number or width, or when the rows do not fit (a state of a shorter context): a snapshot is never
// written in part.
void state_restore(Ops& ops, const StateSnapshot& s, ModelState& state);

}  // namespace coli
