#include "backend/device/ring_rows.h"

#include <algorithm>

namespace coli {

std::vector<RowRun> ring_write_runs(int64_t m, int64_t ring, int64_t row0) {
    std::vector<RowRun> runs;
    for (int64_t i = std::max<int64_t>(0, m - ring); i < m;) {
        const int64_t at = (row0 + i) % ring, count = std::min(m - i, ring - at);
        runs.push_back({i, at, count});
        i += count;
    }
    return runs;
}

}  // namespace coli
