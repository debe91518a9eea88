// The CUDA backend's registration. Built into every binary (the capability table answers everywhere);
// COLI_HAVE_CUDA says whether the backend itself is compiled in (cuda/backend.cmake).
#include "backend/cuda/support.h"
#include "backend/registry.h"

#if COLI_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace coli {

namespace {

constexpr int kRank = 10;  // first for `auto`

#if COLI_HAVE_CUDA
BackendInfo probe(const BackendOptions&) {
    const CudaProbe p = cuda_probe();
    return {"cuda", true, p.ok, p.detail, cuda_supports, ""};
}

std::unique_ptr<Backend> create(ThreadPool&, const BackendOptions& o) {
    return cuda_backend_create(o.vram_bytes);
}

void bench(const BackendOptions&) {
    cuda_bench_print();
}
#endif

}  // namespace

BackendEntry cuda_backend_entry() {
#if COLI_HAVE_CUDA
    return {.name = "cuda",
            .rank = kRank,
            .support = cuda_supports,
            .host_step = cuda_host_step,
            .probe = probe,
            .create = create,
            .bench = bench};
#else
    return {.name = "cuda",
            .rank = kRank,
            .support = cuda_supports,
            .host_step = cuda_host_step,
            .absent = "not compiled in: rebuild with -DCOLI_CUDA=ON (needs the CUDA toolkit)"};
#endif
}

}  // namespace coli
