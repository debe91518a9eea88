#include "store/buffer_meter.h"

#include <atomic>

namespace coli {

namespace {
std::atomic<uint64_t> g_live{0};
std::atomic<uint64_t> g_peak{0};
std::atomic<uint64_t> g_allocations{0};
}  // namespace

BufferMeterReading buffer_meter_read() {
    return {g_live.load(), g_peak.load(), g_allocations.load()};
}

void buffer_meter_reset_peak() {
    g_peak.store(g_live.load());
}

void buffer_meter_add(uint64_t bytes) {
    g_allocations.fetch_add(1);
    const uint64_t now = g_live.fetch_add(bytes) + bytes;
    uint64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
}

void buffer_meter_sub(uint64_t bytes) {
    g_live.fetch_sub(bytes);
}

}  // namespace coli
