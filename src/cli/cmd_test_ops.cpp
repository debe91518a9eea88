// `coli test-ops`: every op on every available backend against the CPU reference (src/backend/op_test.h),
// as a support matrix. Backends that are not compiled in or have no device are reported as SKIPPED.
#include <fmt/format.h>

#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test.h"
#include "backend/registry.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"

#if COLI_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#if COLI_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace coli {
namespace {

struct TestOpsArgs {
    std::string backend = "all";  // a backend name or "all"
    bool require = false;         // a skipped backend is a failure
    bool bench = false;           // also run the device benchmarks
    int vk_device = -1;           // the Vulkan device tested (-1: the best one)
};

void test_ops(const TestOpsArgs& a) {
    ThreadPool& pool = default_pool();
    CpuBackend reference(pool);
    std::vector<OpTestColumn> columns;
    bool known = a.backend == "all";
    for (const BackendInfo& info : backend_list(a.vk_device)) {
        if (a.backend != "all" && info.name != a.backend) continue;
        known = true;
        OpTestColumn col{info.name, {}, {}};
        if (!info.available) {
            col.skipped = info.detail;
            fmt::print(stderr, "test-ops: SKIPPED {}: {}\n", info.name, info.detail);
        } else {
            std::unique_ptr<Backend> b = backend_create(info.name, pool, BackendOptions{0, a.vk_device});
            fmt::print(stderr, "test-ops: {} ({})\n", info.name, b->description());
            col.checks = op_test_backend(*b, reference);
        }
        columns.push_back(std::move(col));
    }
    check(known, "test-ops: unknown backend '{}'", a.backend);
    fmt::print("{}", op_test_matrix(columns));

    int failed = 0, skipped = 0, cases = 0;
    for (const auto& col : columns) {
        skipped += !col.skipped.empty();
        for (const OpCheck& c : col.checks) {
            ++cases;
            failed += c.status == OpCheckStatus::fail;
        }
    }
    fmt::print("test-ops: {} cases, {} failed, {} backend(s) skipped\n", cases, failed, skipped);
    if (a.bench) {
#if COLI_HAVE_CUDA
        for (const auto& col : columns)
            if (col.backend == "cuda" && col.skipped.empty()) cuda_bench_print();
#endif
#if COLI_HAVE_VULKAN
        for (const auto& col : columns)
            if (col.backend == "vulkan" && col.skipped.empty()) vulkan_bench_print(a.vk_device);
#endif
    }
    check(failed == 0, "test-ops: {} op case(s) outside their tolerance", failed);
    check(!a.require || skipped == 0, "test-ops: --require and {} backend(s) were skipped", skipped);
}

}  // namespace

void cmd_test_ops_add(CLI::App& app) {
    auto args = std::make_shared<TestOpsArgs>();
    CLI::App* cmd =
        app.add_subcommand("test-ops", "Test every op of every available backend against the CPU");
    cmd->add_option("--backend,-b", args->backend, "Backend to test, or all")->capture_default_str();
    cmd->add_flag("--require", args->require,
                  "Fail when a requested backend is skipped (no device, not compiled)");
    cmd->add_flag("--bench", args->bench,
                  "Also benchmark the device kernels beside their bounds (CUDA, Vulkan)");
    cmd->add_option("--vk-device", args->vk_device, "Vulkan device to test (-1 = the best one)")
        ->capture_default_str();
    cmd->callback([args] { test_ops(*args); });
}

}  // namespace coli
