// The median of a benchmark's repeated measurements: the figure every bench reports, so that a run disturbed
// by the machine moves it less than a mean.
#pragma once

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace coli {

// The middle value of v, or the mean of the two middle values when v has an even count.
template <typename T>
T median(std::vector<T> v) {
    check(!v.empty(), "median of nothing");
    const size_t m = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + m, v.end());
    if (v.size() % 2) return v[m];
    const T upper = v[m];
    return (*std::max_element(v.begin(), v.begin() + m) + upper) / 2;
}

}  // namespace coli
