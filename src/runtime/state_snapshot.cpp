#include "runtime/state_snapshot.h"

#include <algorithm>

#include "core/error.h"

namespace coli {

uint64_t StateSnapshot::bytes() const {
    uint64_t n = 0;
    for (const SnapshotTensor& t : tensors) n += t.data.size() * sizeof(float);
    return n;
}

int64_t state_rows(const StateTensor& t, int64_t n_past) {
    if (t.tensor->empty()) return 0;
    if (t.positions_per_row == 0) return t.tensor->rows();
    return std::min(n_past / t.positions_per_row, t.tensor->rows());
}

StateSnapshot state_snapshot(Ops& ops, ModelState& state) {
    StateSnapshot s;
    s.n_past = state.n_past;
    for (const StateTensor& t : state.tensors()) {
        SnapshotTensor& out = s.tensors.emplace_back();
        out.rows = state_rows(t, state.n_past);
        out.cols = t.tensor->cols();
        // Only the filled rows cross from the device: a cache's storage is max_ctx rows long.
        if (out.rows > 0) out.data = ops.read(t.tensor->leading_rows(out.rows));
    }
    return s;
}

void state_restore(Ops& ops, const StateSnapshot& s, ModelState& state) {
    const std::vector<StateTensor> tensors = state.tensors();
    check(tensors.size() == s.tensors.size(), "state snapshot: {} tensors, the model's state has {}",
          s.tensors.size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        const SnapshotTensor& from = s.tensors[i];
        const Tensor& to = *tensors[i].tensor;
        check(from.rows == state_rows(tensors[i], s.n_past) && (from.rows == 0 || from.cols == to.cols()) &&
                  from.data.size() == size_t(from.rows * from.cols),
              "state snapshot: tensor {} holds [{}, {}], the state's takes {} rows of {} at {} tokens", i,
              from.rows, from.cols, state_rows(tensors[i], s.n_past), to.cols(), s.n_past);
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
        const SnapshotTensor& from = s.tensors[i];
        if (from.rows == 0) continue;
        Tensor rows = tensors[i].tensor->leading_rows(from.rows);
        ops.write(rows, from.data);
    }
    state.n_past = s.n_past;
}

}  // namespace coli
