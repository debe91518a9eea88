// vk::spirv_coop_matrix_khr, which rewrites the cooperative-matrix GEMV's SPIR-V from the NV extension
// (what Debian 12's glslang compiles) to the KHR one (what the driver runs fast). Lavapipe has no
// cooperative matrices and Debian 12's spirv-val does not know the KHR extension, so the rewritten module is
// read back here instruction by instruction against the SPV_KHR_cooperative_matrix encoding.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"

#if COLI_HAVE_VULKAN
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/spirv_access.h"
#include "backend/vulkan/spirv_coop.h"
#endif

namespace coli {
namespace {

#if COLI_HAVE_VULKAN
// SPIR-V numbers, from the specification and the two extensions' texts.
constexpr uint32_t kOpExtension = 10, kOpCapability = 17, kOpTypeFloat = 22, kOpConstant = 43;
constexpr uint32_t kCapabilityNv = 5357, kCapabilityKhr = 6022;
constexpr uint32_t kOpTypeNv = 5358, kOpLengthNv = 5362;  // the NV opcodes: 5358 .. 5362
constexpr uint32_t kOpTypeKhr = 4456, kOpStoreKhr = 4458, kOpMulAddKhr = 4459;
constexpr uint32_t kUseA = 0, kUseB = 1, kUseAccumulator = 2, kRowMajor = 0;
constexpr size_t kHeader = 5;

struct Instr {
    uint32_t op;
    std::vector<uint32_t> w;  // operands
};

std::vector<Instr> instructions(const std::vector<uint32_t>& code) {
    std::vector<Instr> out;
    for (size_t i = kHeader; i < code.size();) {
        const uint32_t n = code[i] >> 16;
        EXPECT_GT(n, 0u);
        if (n == 0) break;
        out.push_back({code[i] & 0xffff, std::vector<uint32_t>(code.begin() + i + 1, code.begin() + i + n)});
        i += n;
    }
    return out;
}

std::vector<uint32_t> gemv_coop_spirv() {
    const auto s = vk::shader_spirv("gemv_coop");
    return {s.begin(), s.end()};
}
#endif

#if COLI_HAVE_VULKAN
using Kind = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;  // component bits, rows, columns, use

// What the rewritten module says, read back instruction by instruction.
struct Khr {
    std::set<Kind> kinds;                                      // its matrix types
    std::vector<std::pair<uint32_t, uint32_t>> store_layouts;  // each store's layout and stride values
    int products = 0;
};

Khr khr_read(const std::vector<uint32_t>& khr) {
    std::map<uint32_t, uint32_t> uint_value, float_width;  // by id
    std::map<uint32_t, Kind> matrix;
    std::map<uint32_t, uint32_t> type_of;
    bool capability = false, extension = false;
    Khr out;
    for (const Instr& i : instructions(khr)) {
        EXPECT_FALSE(i.op >= kOpTypeNv && i.op <= kOpLengthNv) << "an NV opcode is left: " << i.op;
        if (i.op == kOpCapability) {
            EXPECT_NE(i.w[0], kCapabilityNv);
            capability = capability || i.w[0] == kCapabilityKhr;
        }
        if (i.op == kOpExtension) {
            const std::string name(reinterpret_cast<const char*>(i.w.data()));
            EXPECT_NE(name, "SPV_NV_cooperative_matrix");
            extension = extension || name == "SPV_KHR_cooperative_matrix";
        }
        if (i.op == kOpTypeFloat) float_width[i.w[0]] = i.w[1];
        if (i.op == kOpConstant && i.w.size() == 3) uint_value[i.w[1]] = i.w[2];
        if (i.op == kOpTypeKhr) {
            EXPECT_EQ(i.w.size(), 6u);
            EXPECT_TRUE(float_width.contains(i.w[1]) && uint_value.contains(i.w[2]) &&
                        uint_value.contains(i.w[3]) && uint_value.contains(i.w[4]) &&
                        uint_value.contains(i.w[5]))
                << "a matrix type's operands are not declared before it";
            EXPECT_EQ(uint_value[i.w[2]], 3u);  // Subgroup scope
            matrix[i.w[0]] = {float_width[i.w[1]], uint_value[i.w[3]], uint_value[i.w[4]],
                              uint_value[i.w[5]]};
            out.kinds.insert(matrix[i.w[0]]);
        }
        if (i.w.size() >= 2 && matrix.contains(i.w[0])) type_of[i.w[1]] = i.w[0];
        if (i.op == kOpStoreKhr) {
            EXPECT_GE(i.w.size(), 4u);
            out.store_layouts.emplace_back(uint_value.at(i.w[2]), uint_value.at(i.w[3]));
        }
        if (i.op == kOpMulAddKhr) {
            ++out.products;
            EXPECT_EQ(i.w.size(), 5u);
            EXPECT_EQ(std::get<3>(matrix.at(i.w[0])), kUseAccumulator);
            EXPECT_EQ(std::get<3>(matrix.at(type_of.at(i.w[2]))), kUseA);
            EXPECT_EQ(std::get<3>(matrix.at(type_of.at(i.w[3]))), kUseB);
            EXPECT_EQ(std::get<3>(matrix.at(type_of.at(i.w[4]))), kUseAccumulator);
        }
    }
    EXPECT_TRUE(capability);
    EXPECT_TRUE(extension);
    for (const auto& [id, v] : uint_value) EXPECT_LT(id, khr[3]) << "an id at or past the module's bound";
    return out;
}

std::vector<uint32_t> khr_of(std::string_view shader) {
    const auto s = vk::shader_spirv(shader);
    const std::vector<uint32_t> nv(s.begin(), s.end());
    EXPECT_TRUE(vk::spirv_uses_coop_matrix_nv(nv));
    std::vector<uint32_t> khr = vk::spirv_coop_matrix_khr(nv);
    EXPECT_FALSE(vk::spirv_uses_coop_matrix_nv(khr));
    EXPECT_EQ(vk::spirv_written_bindings(khr), vk::spirv_written_bindings(nv));
    return khr;
}

// gemv_coop.comp's and coop_probe.comp's MatA, MatB and MatC: 16x16 f16, 16x8 f16, 16x8 f32.
const std::set<Kind> kGemvKinds = {{16, 16, 16, kUseA}, {16, 16, 8, kUseB}, {32, 16, 8, kUseAccumulator}};
#endif

TEST(VulkanSpirvCoop, TheCoopGemvBecomesKhrWithEachMatrixInItsRole) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    const Khr k = khr_read(khr_of("gemv_coop"));
    EXPECT_EQ(k.kinds, kGemvKinds);
    EXPECT_GT(k.products, 0);
#endif
}

TEST(VulkanSpirvCoop, TheLayoutProbesStoresKeepTheirLayoutAndStride) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    const Khr k = khr_read(khr_of("coop_probe"));
    EXPECT_EQ(k.kinds, kGemvKinds);
    EXPECT_EQ(k.products, 1);
    // A, B, C and D row-major (`false`), strides in 32-bit words: 16 f16, 8 f16, 8 f32, 8 f32.
    EXPECT_EQ(k.store_layouts, (std::vector<std::pair<uint32_t, uint32_t>>{
                                   {kRowMajor, 8}, {kRowMajor, 4}, {kRowMajor, 8}, {kRowMajor, 8}}));
#endif
}

TEST(VulkanSpirvCoop, ShadersWithoutCooperativeMatricesAreLeftAlone) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    const auto s = vk::shader_spirv("softmax");
    EXPECT_FALSE(vk::spirv_uses_coop_matrix_nv(s));
    EXPECT_EQ(vk::spirv_coop_matrix_khr(s), std::vector<uint32_t>(s.begin(), s.end()));
#endif
}

TEST(VulkanSpirvCoop, AMatrixTypeInTwoRolesIsRefused) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    // A product whose B operand is its A: the 16x16 f16 type would be both MatrixA and MatrixB.
    std::vector<uint32_t> nv = gemv_coop_spirv();
    constexpr uint32_t kOpMulAddNv = 5361;
    constexpr size_t kA = 3, kB = 4;  // operand words after the first word
    bool changed = false;
    for (size_t i = kHeader; i < nv.size() && !changed; i += nv[i] >> 16)
        if ((nv[i] & 0xffff) == kOpMulAddNv) {
            nv[i + kB] = nv[i + kA];
            changed = true;
        }
    ASSERT_TRUE(changed);
    EXPECT_THROW(vk::spirv_coop_matrix_khr(nv), Error);
#endif
}

}  // namespace
}  // namespace coli
