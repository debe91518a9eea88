#include "backend/metal/msl_gen/translate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <spirv_cross/spirv_msl.hpp>

namespace coli::metal::gen {

namespace {

namespace sc = spirv_cross;

constexpr uint32_t kMslMajor = 2, kMslMinor = 3;  // MSL 2.3 (macOS 11): SIMD-group functions, safe math
constexpr uint32_t kThreadgroupAlign = 16;        // Metal allocates threadgroup memory in 16-byte units

// CompilerMSL with access to the parsed module, for what the public API does not list.
class MslCompiler : public sc::CompilerMSL {
public:
    using CompilerMSL::CompilerMSL;

    // Names every file-scope declaration SPIRV-Cross writes (structs, constants, functions other than the
    // entry point) prefix_<id or name>, so that two kernels' declarations never meet in one library.
    void prefix_names(const std::string& prefix) {
        auto rename = [&](uint32_t id) {
            const std::string& old = get_name(id);
            set_name(id, fmt::format("{}_{}", prefix, old.empty() ? std::to_string(id) : old));
        };
        ir.for_each_typed_id<sc::SPIRType>([&](uint32_t id, sc::SPIRType& t) {
            if (t.basetype == sc::SPIRType::Struct && t.self == id) rename(id);
        });
        ir.for_each_typed_id<sc::SPIRConstant>([&](uint32_t id, sc::SPIRConstant&) { rename(id); });
        ir.for_each_typed_id<sc::SPIRConstantOp>([&](uint32_t id, sc::SPIRConstantOp&) { rename(id); });
        ir.for_each_typed_id<sc::SPIRFunction>([&](uint32_t id, sc::SPIRFunction&) {
            if (id != ir.default_entry_point) rename(id);
        });
    }

    // Bytes of one MSL value of type t in threadgroup memory (vectors of 3 take 4 lanes, as in MSL).
    uint64_t threadgroup_bytes_of(const sc::SPIRType& t, const std::string& kernel) const {
        if (t.basetype == sc::SPIRType::Struct)
            throw KernelError(
                fmt::format("kernel {}: a shared struct, which the threadgroup memory count does not "
                            "size (msl_gen/translate.cpp)",
                            kernel));
        uint64_t n = uint64_t{t.width} / 8 * (t.vecsize == 3 ? 4 : t.vecsize) * t.columns;
        for (size_t d = 0; d < t.array.size(); ++d) {
            if (!t.array_size_literal[d])
                throw KernelError(
                    fmt::format("kernel {}: a shared array is sized by a specialization constant; "
                                "freeze it in msl_gen/variants.cpp",
                                kernel));
            n *= t.array[d];
        }
        return n;
    }

    // The static threadgroup memory of the entry point's `shared` variables, each 16-byte aligned.
    uint64_t threadgroup_bytes(const std::string& kernel) const {
        uint64_t total = 0;
        ir.for_each_typed_id<sc::SPIRVariable>([&](uint32_t, const sc::SPIRVariable& v) {
            if (v.storage != spv::StorageClassWorkgroup) return;
            // The variable's pointer type carries the pointee's scalar, vector and array shape.
            const uint64_t n = threadgroup_bytes_of(get<sc::SPIRType>(v.basetype), kernel);
            total += (n + kThreadgroupAlign - 1) / kThreadgroupAlign * kThreadgroupAlign;
        });
        return total;
    }
};

bool has_capability(const sc::Compiler& c, std::initializer_list<spv::Capability> caps) {
    for (spv::Capability cap : c.get_declared_capabilities())
        if (std::find(caps.begin(), caps.end(), cap) != caps.end()) return true;
    return false;
}

bool uses_subgroups(const sc::Compiler& c) {
    for (spv::Capability cap : c.get_declared_capabilities())
        if ((cap >= spv::CapabilityGroupNonUniform && cap <= spv::CapabilityGroupNonUniformQuad) ||
            cap == spv::CapabilitySubgroupBallotKHR || cap == spv::CapabilitySubgroupVoteKHR)
            return true;
    return false;
}

MetalConstantType constant_type(const sc::SPIRType& t, const std::string& kernel) {
    switch (t.basetype) {
        case sc::SPIRType::UInt:
            return MetalConstantType::u32;
        case sc::SPIRType::Int:
            return MetalConstantType::i32;
        case sc::SPIRType::Float:
            return MetalConstantType::f32;
        case sc::SPIRType::Boolean:
            return MetalConstantType::boolean;
        default:
            throw KernelError(
                fmt::format("kernel {}: a specialization constant of a type other than a 32-bit "
                            "scalar or bool",
                            kernel));
    }
}

// The kernel's name: the shader's, with each frozen value (_k<spec id>_<value>).
std::string kernel_name(const std::string& shader, const std::vector<MetalFrozen>& frozen) {
    std::string name = shader;
    for (const MetalFrozen& f : frozen) name += fmt::format("_k{}_{}", f.spec_id, f.value);
    return name;
}

// Fixes each frozen specialization constant's value and makes it a plain constant, so that array sizes
// that depend on it become literals; the rest keep their spec ids offset to the kernel's function-constant
// indices. Returns the function constants.
std::vector<MetalConstant> specialize(MslCompiler& c, const std::vector<MetalFrozen>& frozen, uint32_t base,
                                      const std::string& kernel) {
    std::vector<MetalConstant> constants;
    std::vector<uint32_t> seen;
    for (const sc::SpecializationConstant& s : c.get_specialization_constants()) {
        sc::SPIRConstant& value = c.get_constant(s.id);
        const auto it = std::find_if(frozen.begin(), frozen.end(),
                                     [&](const MetalFrozen& f) { return f.spec_id == s.constant_id; });
        seen.push_back(s.constant_id);
        if (it != frozen.end()) {
            value.m.c[0].r[0].u32 = it->value;
            value.specialization = false;
            c.unset_decoration(s.id, spv::DecorationSpecId);
            continue;
        }
        if (s.constant_id >= kMetalConstantsPerKernel)
            throw KernelError(
                fmt::format("kernel {}: specialization constant {} is past the {} function-constant "
                            "indices each kernel has (kernel_table.h)",
                            kernel, s.constant_id, kMetalConstantsPerKernel));
        constants.push_back({s.constant_id, base + s.constant_id,
                             constant_type(c.get_type(value.constant_type), kernel), value.scalar()});
        c.set_decoration(s.id, spv::DecorationSpecId, base + s.constant_id);
    }
    for (const MetalFrozen& f : frozen)
        if (std::find(seen.begin(), seen.end(), f.spec_id) == seen.end())
            throw KernelError(
                fmt::format("kernel {}: no specialization constant {} to freeze", kernel, f.spec_id));
    std::sort(constants.begin(), constants.end(),
              [](const MetalConstant& a, const MetalConstant& b) { return a.spec_id < b.spec_id; });
    return constants;
}

// The elements of a buffer binding: 1, or its array's length, which must be a literal or frozen.
uint32_t binding_count(const MslCompiler& c, const sc::SPIRType& t, const std::string& kernel,
                       uint32_t binding) {
    if (t.array.empty()) return 1;
    if (t.array.size() > 1)
        throw KernelError(
            fmt::format("kernel {}: binding {} is a multi-dimensional array of buffers", kernel, binding));
    if (t.array_size_literal[0]) return t.array[0];
    const sc::SPIRConstant& size = c.get_constant(t.array[0]);
    if (size.specialization)
        throw KernelError(
            fmt::format("kernel {}: binding {}'s array length is a specialization constant; freeze "
                        "it in msl_gen/variants.cpp",
                        kernel, binding));
    return size.scalar();
}

// Maps set 0's storage buffers and the push constants to Metal's buffer slots, returns the table's rows.
std::vector<MetalBuffer> bind_buffers(MslCompiler& c, const std::string& kernel, uint32_t& push_bytes) {
    const sc::ShaderResources r = c.get_shader_resources();
    if (!r.uniform_buffers.empty() || !r.sampled_images.empty() || !r.storage_images.empty() ||
        !r.separate_images.empty() || !r.separate_samplers.empty() || !r.atomic_counters.empty() ||
        !r.acceleration_structures.empty())
        throw KernelError(
            fmt::format("kernel {}: only storage buffers and push constants map to Metal here", kernel));
    std::vector<MetalBuffer> buffers;
    for (const sc::Resource& b : r.storage_buffers) {
        const uint32_t set = c.get_decoration(b.id, spv::DecorationDescriptorSet);
        const uint32_t binding = c.get_decoration(b.id, spv::DecorationBinding);
        if (set != 0) throw KernelError(fmt::format("kernel {}: a buffer in descriptor set {}", kernel, set));
        const bool written = !c.get_buffer_block_flags(b.id).get(spv::DecorationNonWritable);
        buffers.push_back({binding, 0, binding_count(c, c.get_type(b.type_id), kernel, binding), written});
    }
    std::sort(buffers.begin(), buffers.end(),
              [](const MetalBuffer& a, const MetalBuffer& b) { return a.binding < b.binding; });
    uint32_t next = 0;  // binding b at slot b, unless an array before it took that slot
    for (MetalBuffer& b : buffers) {
        b.first = std::max(b.binding, next);
        next = b.first + b.count;
        if (next > kMetalPushSlot)
            throw KernelError(
                fmt::format("kernel {}: binding {} needs Metal buffer slots up to {}, past the {} below "
                            "the push-constant slot",
                            kernel, b.binding, next - 1, kMetalPushSlot));
        sc::MSLResourceBinding rb;
        rb.stage = spv::ExecutionModelGLCompute;
        rb.desc_set = 0;
        rb.binding = b.binding;
        rb.count = b.count;
        rb.msl_buffer = b.first;
        c.add_msl_resource_binding(rb);
    }
    push_bytes = 0;
    if (!r.push_constant_buffers.empty()) {
        push_bytes = static_cast<uint32_t>(
            c.get_declared_struct_size(c.get_type(r.push_constant_buffers[0].base_type_id)));
        sc::MSLResourceBinding rb;
        rb.stage = spv::ExecutionModelGLCompute;
        rb.desc_set = sc::kPushConstDescSet;
        rb.binding = sc::kPushConstBinding;
        rb.msl_buffer = kMetalPushSlot;
        c.add_msl_resource_binding(rb);
    }
    return buffers;
}

bool identifier_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// text with every whole-identifier occurrence of `word` replaced by `by`.
std::string replace_word(const std::string& text, const std::string& word, const std::string& by) {
    std::string out;
    size_t from = 0;
    for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) {
        const bool alone = (at == 0 || !identifier_char(text[at - 1])) &&
                           (at + word.size() == text.size() || !identifier_char(text[at + word.size()]));
        if (!alone) continue;
        out.append(text, from, at - from).append(by);
        from = at + word.size();
    }
    return out.append(text, from);
}

void check_no_implicit_buffers(const MslCompiler& c, const std::string& kernel) {
    if (c.needs_buffer_size_buffer())
        throw KernelError(
            fmt::format("kernel {}: reads a runtime array's length (.length()), which Metal would "
                        "pass in an implicit buffer; pass the length in the push constants",
                        kernel));
    if (c.needs_swizzle_buffer() || c.needs_output_buffer() || c.needs_patch_output_buffer() ||
        c.needs_view_mask_buffer() || c.needs_dispatch_base_buffer() || c.needs_input_threadgroup_mem())
        throw KernelError(
            fmt::format("kernel {}: SPIRV-Cross asks for an implicit buffer or threadgroup input", kernel));
}

}  // namespace

std::string unsupported_reason(std::span<const uint32_t> spirv) {
    const sc::Compiler c(spirv.data(), spirv.size());
    if (has_capability(c, {spv::CapabilityDotProductInputAll, spv::CapabilityDotProductInput4x8Bit,
                           spv::CapabilityDotProductInput4x8BitPacked, spv::CapabilityDotProduct}))
        return "packed 8-bit integer dot products (SPV_KHR_integer_dot_product) have no MSL equivalent: the "
               "host runs the f32 path";
    return {};
}

Kernel translate(const std::string& shader, std::span<const uint32_t> spirv,
                 const std::vector<MetalFrozen>& frozen, uint32_t constant_base) {
    Kernel k;
    k.shader = shader;
    k.name = kernel_name(shader, frozen);
    k.entry = "coli_" + k.name;
    k.frozen = frozen;
    try {
        MslCompiler c(spirv.data(), spirv.size());
        if (c.get_execution_model() != spv::ExecutionModelGLCompute)
            throw KernelError(fmt::format("kernel {}: not a compute shader", k.name));
        sc::CompilerMSL::Options options;
        options.platform = sc::CompilerMSL::Options::macOS;
        options.set_msl_version(kMslMajor, kMslMinor);
        options.fixed_subgroup_size = kMetalSimdWidth;
        c.set_msl_options(options);

        // The threadgroup size, read before specialize() renumbers the spec ids.
        sc::SpecializationConstant x, y, z;
        c.get_work_group_size_specialization_constants(x, y, z);
        for (uint32_t d = 0; d < 3; ++d)
            k.threads[d] = c.get_execution_mode_argument(spv::ExecutionModeLocalSize, d);
        if (y.id || z.id)
            throw KernelError(fmt::format(
                "kernel {}: a threadgroup height or depth set by a specialization constant", k.name));
        k.constants = specialize(c, frozen, constant_base, k.name);
        k.buffers = bind_buffers(c, k.name, k.push_bytes);
        if (x.id) {  // the host's value of that constant (a frozen one is fixed here), the shader's default
                     // here
            k.threads[0] = c.get_constant(x.id).scalar();
            if (c.get_constant(x.id).specialization) k.threads_x_spec = static_cast<int32_t>(x.constant_id);
        }
        const uint64_t threads = uint64_t{k.threads[0]} * k.threads[1] * k.threads[2];
        if (threads > kMetalMaxThreads)
            throw KernelError(fmt::format("kernel {}: {} threads per threadgroup, more than Metal's {}",
                                          k.name, threads, kMetalMaxThreads));
        const uint64_t shared = c.threadgroup_bytes(k.name);
        if (shared > kMetalMaxThreadgroupBytes)
            throw KernelError(fmt::format("kernel {}: {} bytes of threadgroup memory, more than Metal's {}",
                                          k.name, shared, kMetalMaxThreadgroupBytes));
        k.threadgroup_bytes = static_cast<uint32_t>(shared);
        k.simdgroup = uses_subgroups(c);

        c.rename_entry_point("main", k.entry, spv::ExecutionModelGLCompute);
        c.prefix_names(k.name);
        k.msl = c.compile();
        check_no_implicit_buffers(c, k.name);
        if (k.msl.find("#define") != std::string::npos)
            throw KernelError(
                fmt::format("kernel {}: SPIRV-Cross wrote a macro (a specialization constant where MSL "
                            "needs a literal, which would clash between kernels); freeze it in "
                            "msl_gen/variants.cpp",
                            k.name));
    } catch (const sc::CompilerError& e) {
        throw KernelError(fmt::format("kernel {}: SPIRV-Cross: {}", k.name, e.what()));
    }
    // The one file-scope constant SPIRV-Cross names by its built-in, whatever the id's name.
    k.msl = replace_word(k.msl, "gl_WorkGroupSize", k.name + "_WorkGroupSize");
    return k;
}

}  // namespace coli::metal::gen
