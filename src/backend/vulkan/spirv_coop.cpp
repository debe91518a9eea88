#include "backend/vulkan/spirv_coop.h"

#include <array>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "backend/vulkan/spirv_format.h"
#include "core/error.h"

namespace coli::vk {

namespace {

// Opcodes, capabilities and operand values of the SPIR-V specification and its two cooperative-matrix
// extensions that the rewrite needs.
constexpr uint32_t kOpExtension = 10, kOpCapability = 17, kOpTypeInt = 21, kOpConstantTrue = 41,
                   kOpConstantFalse = 42, kOpConstant = 43;
constexpr uint32_t kCapabilityNv = 5357, kCapabilityKhr = 6022;
constexpr uint32_t kOpTypeNv = 5358, kOpLoadNv = 5359, kOpStoreNv = 5360, kOpMulAddNv = 5361,
                   kOpLengthNv = 5362;
constexpr uint32_t kOpTypeKhr = 4456, kOpStoreKhr = 4458, kOpMulAddKhr = 4459, kOpLengthKhr = 4460;
constexpr std::string_view kExtensionNv = "SPV_NV_cooperative_matrix";
constexpr std::string_view kExtensionKhr = "SPV_KHR_cooperative_matrix";
constexpr uint32_t kIntWidth = 32;
// The values of the KHR operands: a matrix's use (MatrixAKHR, MatrixBKHR, MatrixAccumulatorKHR) and a
// memory layout (RowMajorKHR, ColumnMajorKHR).
enum Use : uint32_t { kUseA = 0, kUseB = 1, kUseAccumulator = 2, kUses = 3 };
constexpr uint32_t kRowMajor = 0, kColumnMajor = 1;
// Operand positions (words after the first) of the NV instructions.
constexpr size_t kMulAddA = 3, kMulAddB = 4, kMulAddC = 5;  // after the result type and id
constexpr size_t kStoreStride = 3, kStoreColumnMajor = 4;   // pointer, object, stride, layout

// An instruction's words: w[0] is its first word.
struct Instruction {
    const uint32_t* w;
    uint32_t words, op;
};

template <typename Fn>
void instructions_visit(std::span<const uint32_t> code, Fn&& fn) {
    for (size_t i = kSpirvHeaderWords; i < code.size();) {
        const uint32_t words = code[i] >> kSpirvWordCountShift;
        check(words > 0 && i + words <= code.size(), "spirv: malformed instruction at word {}", i);
        fn(Instruction{&code[i], words, code[i] & kSpirvOpcodeMask});
        i += words;
    }
}

std::string_view literal_string(const Instruction& in, size_t first) {
    const char* s = reinterpret_cast<const char*>(in.w + first);
    return {s, strnlen(s, (in.words - first) * sizeof(uint32_t))};
}

// A string literal's words (nul-terminated, zero-padded).
std::vector<uint32_t> string_words(std::string_view s) {
    std::vector<uint32_t> w(s.size() / sizeof(uint32_t) + 1, 0);
    std::memcpy(w.data(), s.data(), s.size());
    return w;
}

// What the rewrite learns from the module before it writes.
struct Survey {
    std::unordered_map<uint32_t, Use> use;            // by NV matrix type id
    std::unordered_map<uint32_t, bool> bools;         // constant bools by id
    std::unordered_map<uint32_t, uint32_t> uint_ids;  // 32-bit unsigned constants' ids by value
    uint32_t uint_type = 0;                           // OpTypeInt 32 0
};

Survey module_survey(std::span<const uint32_t> code) {
    Survey s;
    std::unordered_set<uint32_t> types;                 // NV matrix types
    std::unordered_map<uint32_t, uint32_t> type_of;     // matrix values' types
    std::vector<std::array<uint32_t, kUses>> products;  // (A, B, C) value ids and the result type
    std::vector<uint32_t> product_types;
    instructions_visit(code, [&](const Instruction& in) {
        if (in.op == kOpTypeInt && in.words == 4 && in.w[2] == kIntWidth && in.w[3] == 0)
            s.uint_type = in.w[1];
        if (in.op == kOpConstant && in.words == 4 && in.w[1] == s.uint_type && s.uint_type != 0)
            s.uint_ids.emplace(in.w[3], in.w[2]);
        if ((in.op == kOpConstantTrue || in.op == kOpConstantFalse) && in.words == 3)
            s.bools[in.w[2]] = in.op == kOpConstantTrue;
        if (in.op == kOpTypeNv) {
            types.insert(in.w[1]);
            return;
        }
        // Past the first matrix type come only types, values and code, whose first operand, where it is a
        // matrix type, is the result's type.
        if (in.words >= 3 && types.contains(in.w[1])) type_of[in.w[2]] = in.w[1];
        if (in.op == kOpMulAddNv && in.words == 6) {
            products.push_back({in.w[kMulAddA], in.w[kMulAddB], in.w[kMulAddC]});
            product_types.push_back(in.w[1]);
        }
    });
    auto role = [&](uint32_t type, Use u) {
        const auto [it, added] = s.use.emplace(type, u);
        check(added || it->second == u, "spirv: cooperative-matrix type {} takes two roles in products",
              type);
    };
    auto value_type = [&](uint32_t id) {
        const auto t = type_of.find(id);
        check(t != type_of.end(), "spirv: the type of cooperative matrix {} is unknown", id);
        return t->second;
    };
    for (size_t i = 0; i < products.size(); ++i) {
        role(value_type(products[i][0]), kUseA);
        role(value_type(products[i][1]), kUseB);
        role(value_type(products[i][2]), kUseAccumulator);
        role(product_types[i], kUseAccumulator);
    }
    for (uint32_t t : types)
        check(s.use.contains(t), "spirv: cooperative-matrix type {} is in no product", t);
    check(s.uint_type != 0 || types.empty(), "spirv: a module with cooperative matrices has no 32-bit uint");
    return s;
}

}  // namespace

bool spirv_uses_coop_matrix_nv(std::span<const uint32_t> code) {
    if (code.size() < kSpirvHeaderWords || code[0] != kSpirvMagic) return false;
    bool found = false;
    instructions_visit(code, [&](const Instruction& in) {
        found = found || (in.op == kOpCapability && in.words == 2 && in.w[1] == kCapabilityNv);
    });
    return found;
}

std::vector<uint32_t> spirv_coop_matrix_khr(std::span<const uint32_t> code) {
    check(code.size() >= kSpirvHeaderWords && code[0] == kSpirvMagic, "spirv: not a SPIR-V module");
    Survey s = module_survey(code);
    if (s.use.empty()) return {code.begin(), code.end()};
    std::vector<uint32_t> out(code.begin(), code.begin() + kSpirvHeaderWords);
    uint32_t& bound = out[kSpirvBoundWord];
    // The constants the KHR operands name, where the module lacks them: declared before the first matrix
    // type (after the uint type, which its scope and size constants need).
    std::vector<uint32_t> missing;
    for (uint32_t v : {uint32_t{kUseA}, uint32_t{kUseB}, uint32_t{kUseAccumulator}})
        if (!s.uint_ids.contains(v)) {
            s.uint_ids[v] = bound++;
            missing.push_back(v);
        }
    auto layout = [&](uint32_t column_major) {
        const auto b = s.bools.find(column_major);
        check(b != s.bools.end(), "spirv: a cooperative-matrix layout is not a constant bool");
        return s.uint_ids.at(b->second ? kColumnMajor : kRowMajor);
    };
    bool constants_written = false;
    instructions_visit(code, [&](const Instruction& in) {
        const uint32_t* w = in.w;
        switch (in.op) {
            case kOpCapability:
                out.insert(out.end(), {w[0], w[1] == kCapabilityNv ? kCapabilityKhr : w[1]});
                return;
            case kOpExtension:
                if (literal_string(in, 1) == kExtensionNv) {
                    const std::vector<uint32_t> name = string_words(kExtensionKhr);
                    out.push_back(spirv_first_word(static_cast<uint32_t>(name.size() + 1), kOpExtension));
                    out.insert(out.end(), name.begin(), name.end());
                    return;
                }
                break;
            case kOpTypeNv:
                if (!constants_written) {
                    for (uint32_t v : missing)
                        out.insert(out.end(),
                                   {spirv_first_word(4, kOpConstant), s.uint_type, s.uint_ids[v], v});
                    constants_written = true;
                }
                out.insert(out.end(), {spirv_first_word(7, kOpTypeKhr), w[1], w[2], w[3], w[4], w[5],
                                       s.uint_ids.at(s.use.at(w[1]))});
                return;
            case kOpLoadNv:
                throw Error(
                    "spirv: cooperative-matrix loads are not rewritten (no shader of this build has one)");
            case kOpStoreNv:
                out.insert(out.end(), {spirv_first_word(in.words, kOpStoreKhr), w[1], w[2],
                                       layout(w[kStoreColumnMajor]), w[kStoreStride]});
                out.insert(out.end(), w + kStoreColumnMajor + 1, w + in.words);
                return;
            case kOpMulAddNv:
                out.push_back(spirv_first_word(in.words, kOpMulAddKhr));
                out.insert(out.end(), w + 1, w + in.words);
                return;
            case kOpLengthNv:
                out.push_back(spirv_first_word(in.words, kOpLengthKhr));
                out.insert(out.end(), w + 1, w + in.words);
                return;
            default:
                break;
        }
        out.insert(out.end(), w, w + in.words);
    });
    return out;
}

}  // namespace coli::vk
