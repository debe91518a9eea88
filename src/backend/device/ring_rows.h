// copy_rows (backend.h) as runs of consecutive rows, for the device backends that write them with buffer
// copies: the rows of an append land in one run, a write that wraps the ring's end in two.
#pragma once

#include <cstdint>
#include <vector>

namespace coli {

// `count` rows of the source from row src_row land in rows [dst_row, dst_row + count) of the destination.
struct RowRun {
    int64_t src_row;  // first row read
    int64_t dst_row;  // first row written
    int64_t count;    // rows copied
};

// copy_rows of m source rows at row0 into a destination of `ring` rows: the last min(m, ring) source rows
// (a later row would overwrite an earlier one), as at most two runs, up to the ring's end and then from its
// start. The runs write different rows, so they may run concurrently.
std::vector<RowRun> ring_write_runs(int64_t m, int64_t ring, int64_t row0);

}  // namespace coli
