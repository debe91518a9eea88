#include "backend/metal/self_test.h"

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"

namespace coli::metal {

SelfTestReport metal_self_test(Device& device) {
    SelfTestReport r;
    r.device =
        fmt::format("{}: SIMD-groups of {}, {} of threadgroup memory, {} recommended working set, {}",
                    device.name(), device.thread_execution_width(), bytes_human(device.threadgroup_memory()),
                    bytes_human(device.recommended_working_set()),
                    device.unified_memory() ? "unified memory" : "memory of its own");
    for (const MetalKernel& k : metal_kernels()) {
        try {
            device.pipeline(k.name);
            ++r.pipelines;
        } catch (const Error& e) {
            r.failures.push_back(e.what());
        }
    }
    return r;
}

}  // namespace coli::metal
