// The Vulkan backend, as the rest of the program sees it: a factory. No Vulkan types here; the class is
// in vulkan_backend_impl.h. Compiled only with -DCOLI_VULKAN=ON.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace coli {

class ThreadPool;

// Opens Vulkan device `device` (--vk-device; -1: the best one: discrete, integrated, virtual, CPU).
// vram_bytes: budget for resident dense weights and the expert tier (0 = the device-local heap less a
// reserve). pool: threads of the host-side routers. Throws coli::Error with the reason when no device is
// usable.
std::unique_ptr<Backend> vulkan_backend_create(uint64_t vram_bytes, int device, ThreadPool& pool);

// `coli test-ops --bench`: decode GEMV GB/s per format beside a device-to-device copy, as a table on
// stdout.
void vulkan_bench_print(int device);

}  // namespace coli
