// A process-wide meter of the memory held by expert read buffers, counted where the buffers are created
// and destroyed (not where the cache does its bookkeeping), so that tests can check that the RAM budget
// holds for the memory really allocated, reads in flight included.
#pragma once

#include <cstdint>

namespace coli {

struct BufferMeterReading {
    uint64_t live_bytes = 0;   // expert read buffers alive now, in every store of the process
    uint64_t peak_bytes = 0;   // the highest live_bytes since the last reset
    uint64_t allocations = 0;  // buffers allocated since the process started
};

BufferMeterReading buffer_meter_read();
void buffer_meter_reset_peak();  // peak := live

// Called by the store for each buffer it allocates and frees.
void buffer_meter_add(uint64_t bytes);
void buffer_meter_sub(uint64_t bytes);

}  // namespace coli
