#include "backend/vulkan/spirv_access.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace coli::vk {

namespace {

constexpr uint32_t kMagic = 0x07230203;  // first word of a SPIR-V module
constexpr size_t kHeaderWords = 5;       // magic, version, generator, id bound, schema
constexpr uint32_t kAllBindings = ~0u;
constexpr uint32_t kMaskBits = 32;
constexpr uint32_t kOpcodeMask = 0xffff;  // an instruction's first word: word count << 16 | opcode
constexpr uint32_t kWordCountShift = 16;

// Opcodes and decorations of the SPIR-V specification that the reader needs.
constexpr uint32_t kOpTypeStruct = 30, kOpTypeArray = 28, kOpTypeRuntimeArray = 29, kOpTypePointer = 32,
                   kOpVariable = 59, kOpDecorate = 71, kOpMemberDecorate = 72;
constexpr uint32_t kDecorationNonWritable = 24, kDecorationBinding = 33, kDecorationDescriptorSet = 34;

}  // namespace

uint32_t spirv_written_bindings(std::span<const uint32_t> code) {
    if (code.size() < kHeaderWords || code[0] != kMagic) return kAllBindings;
    std::unordered_map<uint32_t, uint32_t> binding, set, pointee, element, struct_members;  // by id
    std::unordered_map<uint32_t, std::unordered_set<uint32_t>> read_only_members;           // by struct id
    std::unordered_set<uint32_t> read_only;                                                 // variable ids
    std::vector<std::pair<uint32_t, uint32_t>> variables;                                   // (id, type)
    for (size_t i = kHeaderWords; i < code.size();) {
        const uint32_t words = code[i] >> kWordCountShift, op = code[i] & kOpcodeMask;
        if (words == 0 || i + words > code.size()) return kAllBindings;
        const uint32_t* w = &code[i];
        if (op == kOpDecorate && words >= 3) {
            if (w[2] == kDecorationBinding && words >= 4) binding[w[1]] = w[3];
            if (w[2] == kDecorationDescriptorSet && words >= 4) set[w[1]] = w[3];
            if (w[2] == kDecorationNonWritable) read_only.insert(w[1]);
        } else if (op == kOpMemberDecorate && words >= 4 && w[3] == kDecorationNonWritable) {
            read_only_members[w[1]].insert(w[2]);
        } else if (op == kOpTypeStruct && words >= 2) {
            struct_members[w[1]] = words - 2;
        } else if ((op == kOpTypeArray || op == kOpTypeRuntimeArray) && words >= 3) {
            element[w[1]] = w[2];
        } else if (op == kOpTypePointer && words >= 4) {
            pointee[w[1]] = w[3];
        } else if (op == kOpVariable && words >= 4) {
            variables.emplace_back(w[2], w[1]);
        }
        i += words;
    }
    uint32_t written = 0;
    for (const auto& [id, pointer] : variables) {
        const auto b = binding.find(id);
        if (b == binding.end()) continue;  // not a resource
        if (const auto s = set.find(id); s != set.end() && s->second != 0) continue;
        if (b->second >= kMaskBits) return kAllBindings;
        const auto p = pointee.find(pointer);
        if (p == pointee.end()) return kAllBindings;
        uint32_t type = p->second;
        for (auto e = element.find(type); e != element.end(); e = element.find(type)) type = e->second;
        const auto members = struct_members.find(type);
        const auto ro = read_only_members.find(type);
        const bool members_read_only = members != struct_members.end() && ro != read_only_members.end() &&
                                       ro->second.size() == members->second;
        if (!read_only.contains(id) && !members_read_only) written |= 1u << b->second;
    }
    return written;
}

}  // namespace coli::vk
