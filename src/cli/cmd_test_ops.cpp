// `coli test-ops`: every op on every available backend against the CPU, and the CPU against naive
// references (src/backend/op_test.h, op_reference.h), as a support matrix. Backends that are not compiled in
// or have no device are reported as SKIPPED.
#include <fmt/format.h>

#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_test.h"
#include "backend/registry.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

struct TestOpsArgs {
    std::string backend = "all";  // a backend name or "all"
    bool require = false;         // a skipped backend is a failure
    bool bench = false;           // also run the device benchmarks
    BackendOptions options;       // the backends' own options (--vk-device: the Vulkan device tested)
};

void test_ops(const TestOpsArgs& a) {
    ThreadPool& pool = default_pool();
    CpuBackend reference(pool);
    std::vector<OpTestColumn> columns;
    bool known = a.backend == "all";
    for (const BackendInfo& info : backend_list(a.options)) {
        if (a.backend != "all" && info.name != a.backend) continue;
        known = true;
        OpTestColumn col{info.name, {}, {}};
        if (!info.available) {
            col.skipped = info.detail;
            fmt::print(stderr, "test-ops: SKIPPED {}: {}\n", info.name, info.detail);
        } else {
            std::unique_ptr<Backend> b = backend_create(info.name, pool, a.options);
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
    if (a.bench)
        for (const auto& col : columns)
            if (const BackendEntry& e = backend_entry(col.backend); e.bench != nullptr && col.skipped.empty())
                e.bench(a.options);
    check(failed == 0, "test-ops: {} op case(s) outside their tolerance", failed);
    check(!a.require || skipped == 0, "test-ops: --require and {} backend(s) were skipped", skipped);
}

}  // namespace

void cmd_test_ops_add(CLI::App& app) {
    auto args = std::make_shared<TestOpsArgs>();
    CLI::App* cmd = app.add_subcommand(
        "test-ops",
        "Test every op of every available backend against the CPU, and the CPU against naive references");
    cmd->add_option("--backend,-b", args->backend, "Backend to test, or all")->capture_default_str();
    cmd->add_flag("--require", args->require,
                  "Fail when a requested backend is skipped (no device, not compiled)");
    cmd->add_flag("--bench", args->bench,
                  "Also benchmark the device kernels beside their bounds (CUDA, Vulkan)");
    backend_flags_add(*cmd, args->options.values);
    cmd->callback([args] { test_ops(*args); });
}

}  // namespace coli
