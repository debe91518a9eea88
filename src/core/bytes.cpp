#include "core/bytes.h"

#include <fmt/format.h>

#include <iterator>

namespace coli {

std::string bytes_human(uint64_t bytes) {
    constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
    constexpr double kStep = 1000;
    double v = static_cast<double>(bytes);
    size_t u = 0;
    while (v >= kStep && u + 1 < std::size(kUnits)) v /= kStep, ++u;
    return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, kUnits[u]);
}

}  // namespace coli
