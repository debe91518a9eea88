// Weights in device memory: the codes and the scales of a host weight, each in its own buffer.
#pragma once

#include <cstdint>

#include "backend/vulkan/buffer.h"
#include "backend/vulkan/stream.h"
#include "formats/format.h"

namespace coli::vk {

struct DeviceWeight {
    Format format = Format::f32;  // encoding (format.h)
    int64_t rows = 0;             // output features
    int64_t cols = 0;             // input features
    BufferPtr data;               // codes, as 32-bit words
    BufferPtr scales;             // scales, or a placeholder buffer for unscaled formats
    uint64_t bytes = 0;           // device bytes of both
};

// Device bytes a host weight takes (codes and scales, each rounded up to whole words).
uint64_t device_bytes_of(const WeightView& w);
// Copies a host weight to the device: written in place on unified memory, else staged through the
// stream (ordered before every later command).
DeviceWeight weight_to_device(Stream& s, const WeightView& w);

}  // namespace coli::vk
