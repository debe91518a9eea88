// What every backend shares (backend/moe_plan.h, backend/device/): the MoE plan's routing inversion, the
// combine's slots and the batched-path choice, worked out by hand; fault injection and output poisoning
// read from the variables that name the backend (and acted on by every device backend here), and the old
// per-backend names refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/device/faults.h"
#include "backend/moe_plan.h"
#include "backend/registry.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

constexpr int64_t kDModel = 4, kDff = 2;

ExpertWeights expert(int32_t id, Format f = Format::f32, int64_t d_ff = kDff) {
    const WeightView gate{f, d_ff, kDModel, nullptr, nullptr};
    const WeightView down{f, kDModel, d_ff, nullptr, nullptr};
    return {id, {gate, nullptr, nullptr}, {gate, nullptr, nullptr}, {down, nullptr, nullptr}, 0, {}};
}

// Three tokens, two slots each: token 0 -> experts 5, 2; token 1 -> 2, 7; token 2 -> 7, 5.
Routing routing() {
    return {3, 2, {5, 2, 2, 7, 7, 5}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}};
}

bool any_weight(const Weight&) {
    return true;
}

TEST(MoePlan, GroupsTheRoutedRowsByExpertInSpanOrderAndTokenOrder) {
    const std::vector<ExpertWeights> experts = {expert(2), expert(3), expert(5), expert(7)};
    const MoePlan p = moe_plan(experts, routing(), kDModel);
    EXPECT_EQ(p.rows, (std::vector<int32_t>{0, 1, 0, 2, 1, 2}));
    EXPECT_EQ(p.gains, (std::vector<float>{0.2f, 0.3f, 0.1f, 0.6f, 0.4f, 0.5f}));
    EXPECT_EQ(p.offset, (std::vector<int64_t>{0, 2, 2, 4, 6}));
    EXPECT_EQ(p.used, (std::vector<size_t>{0, 2, 3}));  // expert 3 has no rows
    EXPECT_EQ(p.max_rows, 2);
    EXPECT_EQ(p.max_ff, kDff);
}

TEST(MoePlan, SlotsListEachTokensRowsInTheOrderTheExpertsAreUsed) {
    const std::vector<ExpertWeights> experts = {expert(2), expert(5), expert(7)};
    const Routing r = routing();
    const MoeSlots s = moe_slots(moe_plan(experts, r, kDModel), r);
    // Rows: expert 2 -> 0 (token 0), 1 (token 1); expert 5 -> 2 (token 0), 3 (token 2); expert 7 -> 4
    // (token 1), 5 (token 2).
    EXPECT_EQ(s.rows, (std::vector<int32_t>{0, 2, 1, 4, 3, 5}));
    EXPECT_EQ(s.gains, (std::vector<float>{0.2f, 0.1f, 0.3f, 0.4f, 0.6f, 0.5f}));
}

TEST(MoePlan, SlotsOfExpertsOutsideTheSpanAreEmpty) {
    const std::vector<ExpertWeights> experts = {expert(7)};
    const Routing r = routing();
    const MoeSlots s = moe_slots(moe_plan(experts, r, kDModel), r);
    EXPECT_EQ(s.rows, (std::vector<int32_t>{-1, -1, 0, -1, 1, -1}));
    EXPECT_EQ(s.gains, (std::vector<float>{0, 0, 0.4f, 0, 0.5f, 0}));
}

TEST(MoePlan, ShapesThatDoNotFitDModelAreRefused) {
    const std::vector<ExpertWeights> experts = {expert(2)};
    EXPECT_THROW(moe_plan(experts, routing(), kDModel + 1), Error);
}

TEST(MoePlan, TheBatchedPathTakesOneShapeFormatAndActivationWithinTheLimits) {
    const Routing r = routing();
    const auto batchable = [&](const std::vector<ExpertWeights>& experts, MoeBatchLimits limits) {
        return moe_batchable(moe_plan(experts, r, kDModel), experts, r, limits);
    };
    const MoeBatchLimits open{8, 8, any_weight};
    EXPECT_TRUE(batchable({expert(2), expert(5)}, open));
    EXPECT_FALSE(batchable({expert(2), expert(5)}, {1, 8, any_weight}));  // 2 rows of an expert
    EXPECT_FALSE(batchable({expert(2), expert(5)}, {8, 1, any_weight}));  // k = 2
    EXPECT_FALSE(batchable({expert(2), expert(5)}, {8, 8, [](const Weight&) { return false; }}));
    EXPECT_FALSE(batchable({expert(2), expert(5, Format::bf16)}, open));
    EXPECT_FALSE(batchable({expert(2), expert(5, Format::f32, kDff + 1)}, open));
    std::vector<ExpertWeights> situ = {expert(2), expert(5)};
    situ[1].act.kind = GluKind::situ;
    EXPECT_FALSE(batchable(situ, open));
    // An expert without rows does not constrain the path.
    EXPECT_TRUE(batchable({expert(2), expert(3, Format::bf16), expert(5)}, open));
}

// Sets an environment variable for the scope of one test.
class EnvVar {
public:
    EnvVar(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
    ~EnvVar() { unsetenv(name_.c_str()); }

private:
    std::string name_;
};

TEST(DeviceFaults, FailOpNamesTheBackendOfEachOp) {
    const EnvVar v(kFailOpEnv, "cuda:matmul,vulkan:moe_experts,cuda:attention");
    const OpSet cuda = fault_ops("cuda"), vulkan = fault_ops("vulkan"), metal = fault_ops("metal");
    for (size_t i = 0; i < cuda.size(); ++i) {
        const auto op = static_cast<OpKind>(i);
        EXPECT_EQ(cuda[i], op == OpKind::matmul || op == OpKind::attention) << op_name(op);
        EXPECT_EQ(vulkan[i], op == OpKind::moe_experts) << op_name(op);
        EXPECT_FALSE(metal[i]) << op_name(op);
    }
}

TEST(DeviceFaults, AnEntryWithoutBackendOrWithAnUnknownOpIsAnError) {
    {
        const EnvVar v(kFailOpEnv, "matmul");
        try {
            fault_ops("cuda");
            FAIL() << "an entry without a backend was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("cuda:matmul"), std::string::npos) << e.what();
        }
    }
    const EnvVar v(kFailOpEnv, "cuda:matmal");
    EXPECT_THROW(fault_ops("vulkan"), Error);
}

TEST(DeviceFaults, PoisonOutputsNamesBackendsOrAll) {
    {
        const EnvVar v(kPoisonOutputsEnv, "vulkan");
        EXPECT_TRUE(poison_outputs("vulkan"));
        EXPECT_FALSE(poison_outputs("cuda"));
    }
    {
        const EnvVar v(kPoisonOutputsEnv, "cuda,vulkan");
        EXPECT_TRUE(poison_outputs("cuda"));
        EXPECT_TRUE(poison_outputs("vulkan"));
    }
    const EnvVar v(kPoisonOutputsEnv, "1");
    EXPECT_TRUE(poison_outputs("cuda"));
    EXPECT_TRUE(poison_outputs("metal"));
}

TEST(DeviceFaults, TheOldPerBackendNamesAreRefusedNamingTheNewOnes) {
    for (const auto& [old_name, new_name] : {std::pair{"COLI_VULKAN_FAIL_OP", kFailOpEnv},
                                             std::pair{"COLI_VULKAN_POISON_OUTPUTS", kPoisonOutputsEnv}}) {
        const EnvVar v(old_name, "1");
        try {
            fault_ops("vulkan");
            poison_outputs("vulkan");
            FAIL() << old_name << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(old_name), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(new_name), std::string::npos) << e.what();
        }
    }
}

// Every device backend of this build that has a device here, created with the environment as it is now.
std::vector<std::unique_ptr<Backend>> device_backends() {
    std::vector<std::unique_ptr<Backend>> out;
    for (const BackendInfo& b : backend_list())
        if (b.available && b.name != "cpu") out.push_back(backend_create(b.name, default_pool()));
    return out;
}

TEST(DeviceFaults, PoisonedOutputsStartAsNanAndInjectedFaultsThrow) {
    const EnvVar poison(kPoisonOutputsEnv, "1");
    const EnvVar fail(kFailOpEnv, "cuda:add,vulkan:add");
    const std::vector<std::unique_ptr<Backend>> backends = device_backends();
    if (backends.empty()) GTEST_SKIP() << "SKIPPED: no device backend has a device here";
    for (const auto& b : backends) {
        Tensor t = b->tensor_new_unfilled(2, 3);
        std::vector<float> host(t.numel(), 0.0f);
        b->tensor_read(t, host);
        for (float v : host) EXPECT_TRUE(std::isnan(v)) << b->name();
        EXPECT_THROW(b->add(t, t, t), Error) << b->name();
    }
}

}  // namespace
}  // namespace coli
