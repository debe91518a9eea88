// Run-time choice of the instruction set for the matmul kernels.
//
// The kernels are compiled with per-function target attributes (matmul_avx2.cpp, matmul_avx512.cpp), not
// per-file -m flags, so the rest of the binary stays baseline x86-64 and runs anywhere; these checks
// decide whether calling them is safe. __builtin_cpu_supports also checks that the OS saves the wide
// registers (XCR0).
#include "formats/format.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace coli {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C (CPUID leaf 1, ECX bit 29), read directly: clang's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx & bit_F16C) != 0;
}
#endif

Simd simd_probe() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (avx512) return Simd::avx512;
    if (avx2) return Simd::avx2;
#endif
    return Simd::scalar;
}

std::atomic<Simd>& simd_slot() {
    static std::atomic<Simd> active{simd_detected()};
    return active;
}

}  // namespace

Simd simd_detected() {
    static const Simd detected = simd_probe();
    return detected;
}

Simd simd_active() {
    return simd_slot().load(std::memory_order_relaxed);
}

void simd_set(Simd s) {
    const Simd best = simd_detected();
    simd_slot().store(static_cast<uint8_t>(s) > static_cast<uint8_t>(best) ? best : s,
                      std::memory_order_relaxed);
}

std::string_view simd_name(Simd s) {
    switch (s) {
        case Simd::scalar:
            return "scalar";
        case Simd::avx2:
            return "avx2";
        case Simd::avx512:
            return "avx512";
    }
    return "unknown";
}

}  // namespace coli
