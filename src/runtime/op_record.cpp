#include "runtime/op_record.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#ifdef __GLIBC__
#include <malloc.h>  // mallopt
#endif

#include "backend/record_backend.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "nn/weights.h"
#include "synth/synth_arch.h"

namespace coli {
namespace {

// How a family is recorded at its real size.
struct Reference {
    std::string_view arch;  // its `coli synth` architecture: config and tensor list at the real widths
    // Layers recorded: the fewest that hold every kind of layer the family has. The op calls do not depend
    // on the number of layers of a kind (each layer of a kind makes the same calls at the same sizes).
    int layers;
    std::string_view layer_kinds;  // why that many (for the source line)
    // Decodes of one token recorded after the prefill: enough that the calls made only at some positions
    // are met at n = 1 too.
    int decodes;
    // Optional branches of the forward that a config.json key switches on, which the architecture's
    // config leaves off: each is recorded once more with the key set (bf16 weights as released).
    std::vector<std::pair<std::string, nlohmann::json>> options = {};
    // config.json values changed in every recording (JSON pointer, value), where fewer layers need them to
    // make the same calls as the real depth.
    std::vector<std::pair<std::string, nlohmann::json>> overrides = {};
    // Its multi-token-prediction layer drafts (--speculate): loaded, and a draft over the prefill and after
    // each decode recorded too.
    bool drafts = false;
};

const std::map<std::string, Reference>& references() {
    static const std::map<std::string, Reference> m = {
        {"olmoe",
         {"olmoe", 2, "every layer alike; a second for the next layer's prefetch", 1, {{"clip_qkv", 8.0}}}},
        // K3's attention residuals mix the block snapshots and the running sum: up to 9 entries over its 93
        // layers in blocks of 12. Blocks of one layer give the same mixes, of 2 to 9 entries, in 8 layers.
        {"kimi_k3",
         {"kimi_k3",
          8,
          "dense MLP in 0, KDA in 0-2 and 4-6, MLA in 3 and 7; attention residual blocks of 1 layer, which "
          "reach the 9 entries of the real 93 layers in blocks of 12",
          1,
          {},
          {{"/text_config/attn_res_block_size", 1}}}},
        // Layers are dense or MoE; two MoE layers, so that the first routes the next one's prefetch.
        {"deepseek_v3",
         {"deepseek_v3",
          3,
          "dense MLP in 0, MoE in 1-2 (the second for the next layer's prefetch): first_k_dense_replace 1",
          1,
          {},
          {{"/first_k_dense_replace", 1}},
          true}},
        // V3 with the DSA indexer in every layer.
        {"deepseek_v32",
         {"deepseek_v32",
          3,
          "dense MLP in 0, MoE in 1-2 (the second for the next layer's prefetch): first_k_dense_replace 1; "
          "an indexer in each",
          1,
          {},
          {{"/first_k_dense_replace", 1}},
          true}},
        // V3.2's layout at GLM-5's sizes.
        {"glm_moe_dsa",
         {"glm_moe_dsa",
          3,
          "dense MLP in 0, MoE in 1-2 (the second for the next layer's prefetch): first_k_dense_replace 1; "
          "an indexer in each",
          1,
          {},
          {{"/first_k_dense_replace", 1}},
          true}},
        // The real 3:1 pattern's first four layers.
        {"kimi_linear",
         {"kimi_linear", 4,
          "KDA in 0-2, MLA in 3; dense MLP in 0, MoE in 1-3 (each of 1-2 routes the next layer's prefetch)",
          1}},
        {"deepseek_v4",
         // The compressors pool windows of 4 (CSA) and 128 (HCA) positions: after a prefill of 512, the
         // decode at position 639 closes one of each.
         {"deepseek_v4", 4, "sliding-window layers 0-1, CSA 2, HCA 3; hash routing in 0-2, scores in 3",
          128}},
    };
    return m;
}

// One checkpoint the forward is recorded on: its float weights' dtype, whether its quantized tensors are
// stored as floats instead, --dense-bits, and a config option.
struct Variant {
    DType dtype;                                           // the float weights' stored dtype
    bool dequantized;                                      // block-FP8 and MXFP4 tensors stored in `dtype`
    int dense_bits;                                        // 0, 8, 4
    const std::pair<std::string, nlohmann::json>* option;  // a config key set, or nullptr
};

// The checkpoints a family meets: its float weights in f32, bf16 and f16; where some tensors are
// quantized (block FP8, MXFP4), those as released (bf16) and dequantized (each float dtype: the same
// calls as released in that dtype but for the quantized tensors' formats, which bf16 as released gives);
// --dense-bits 8 and 4; and each config option.
std::vector<Variant> variants(const Reference& ref, bool has_quantized) {
    std::vector<Variant> v;
    if (has_quantized) v.push_back({DType::bf16, false, 0, nullptr});
    for (DType d : {DType::f32, DType::bf16, DType::f16}) v.push_back({d, has_quantized, 0, nullptr});
    for (int bits : {8, 4}) v.push_back({DType::bf16, false, bits, nullptr});
    for (const auto& option : ref.options) v.push_back({DType::bf16, false, 0, &option});
    return v;
}

// Block scales: E8M0 (DeepSeek-V4), packed MXFP4's, or block FP8's F32 `_scale_inv` (DeepSeek-V3).
bool is_scales(const SynthTensor& t) {
    return t.dtype == DType::f8_e8m0 || (t.dtype == DType::f32 && t.name.ends_with(kScaleInvSuffix)) ||
           (t.dtype == DType::u8 && t.name.ends_with(std::string(kPackedScaleSuffix)));
}

// The tensor list with every block-FP8 and MXFP4 weight stored as a float of the checkpoint's dtype (no
// scales); false when there was none.
bool dequantize(std::vector<SynthTensor>& tensors) {
    bool any = false;
    std::vector<SynthTensor> out;
    for (SynthTensor& t : tensors) {
        if (is_scales(t)) continue;
        if (t.dtype == DType::f8_e4m3) {
            t.dtype.reset();
            any = true;
        } else if (t.dtype == DType::i8 || (t.dtype == DType::u8 && t.name.ends_with(kPackedSuffix))) {
            if (t.name.ends_with(kPackedSuffix))
                t.name = t.name.substr(0, t.name.size() - kPackedSuffix.size()) + ".weight";
            t.shape.back() *= 2;  // two MXFP4 codes per byte
            t.dtype.reset();
            any = true;
        }
        out.push_back(std::move(t));
    }
    tensors = std::move(out);
    return any;
}

// The fields of a call that tell calls apart (all but the weight pointer).
auto call_key(const OpCall& c) {
    const OpDesc& d = c.desc;
    return std::make_tuple(c.forward_tokens, d.op, d.n, d.format, d.rows, d.cols, d.glu, d.width, d.heads,
                           d.kv_heads, d.head_dim, d.latent, d.context, d.experts, d.top_k, d.taps, d.entries,
                           d.groups, d.ratio, d.window, d.streams);
}
using CallKey = decltype(call_key(OpCall{}));

// Distinct calls in the order first made.
class CallSet {
public:
    void add(const OpCall& c) {
        if (seen_.insert(call_key(c)).second) calls_.push_back(c);
    }
    void add(int64_t forward_tokens, std::span<const OpDesc> calls) {
        for (const OpDesc& d : calls) add(OpCall{forward_tokens, d});
    }
    std::vector<OpCall> take() { return std::move(calls_); }

private:
    std::set<CallKey> seen_;
    std::vector<OpCall> calls_;
};

// The architecture's config.json at the family's recorded size, in a float dtype.
nlohmann::json reference_config(const SynthArch& arch, const Reference& ref, DType dtype) {
    SynthOptions o;
    o.arch = std::string(arch.name);
    o.layers = ref.layers;
    o.dtype = dtype;
    nlohmann::json config = arch.config(o);
    for (const auto& [pointer, value] : ref.overrides) config[nlohmann::json::json_pointer(pointer)] = value;
    return config;
}

// Records the family's forward on one shapes-only checkpoint of these tensors (float ones unset in
// v.dtype): a prefill, then `decodes` decodes.
std::vector<OpCall> record(const std::string& family, const nlohmann::json& config,
                           const std::vector<SynthTensor>& tensors, const Variant& v, const Reference& ref) {
    std::vector<TensorInfo> infos;
    infos.reserve(tensors.size());
    for (const SynthTensor& t : tensors)
        infos.push_back(TensorInfo{.name = t.name, .dtype = t.dtype.value_or(v.dtype), .shape = t.shape});
    const auto ckpt =
        Checkpoint::shapes(fmt::format("{} (shapes only, for the op record)", family), config, infos);

    RecordBackend backend;
    Ops ops(backend, backend);
    LoadOptions load;
    load.dense_bits = v.dense_bits;
    load.draft = ref.drafts;
    load.store.io_threads = 1;  // nothing is read
    const std::unique_ptr<Model> model = model_load(*ckpt, ops, load);
    const std::unique_ptr<ModelState> state = model->state_new();

    CallSet out;
    std::vector<OpDesc> calls;
    ops.record_to(&calls);
    const std::vector<int32_t> ids(kRecordPrefill, 0);
    model->forward(ids, *state, false);
    out.add(kRecordPrefill, calls);
    const auto draft = [&](int64_t n) {  // the draft head over the last forward's n rows
        if (!ref.drafts) return;
        calls.clear();
        model->draft(std::span(ids).first(static_cast<size_t>(n)), *state);
        out.add(n, calls);
    };
    draft(kRecordPrefill);
    for (int i = 0; i < ref.decodes; ++i) {
        calls.clear();
        model->forward(std::span(ids).first(kRecordDecode), *state, false);
        out.add(kRecordDecode, calls);
        draft(kRecordDecode);
    }
    // A step of the server's continuous batching (nn/batch.h): this sequence's next token beside another's.
    const std::unique_ptr<ModelState> other = model->state_new();
    const SequenceStep batch[] = {{std::span(ids).first(kRecordDecode), state.get()},
                                  {std::span(ids).first(kRecordDecode), other.get()}};
    calls.clear();
    model->forward_batch(batch);
    out.add(2 * kRecordDecode, calls);
    if (ref.drafts) {  // and the two sequences' drafts in one pass
        const DraftStep drafts[] = {{std::span(ids).first(kRecordDecode), state.get()},
                                    {std::span(ids).first(kRecordDecode), other.get()}};
        calls.clear();
        model->draft(drafts);
        out.add(2 * kRecordDecode, calls);
    }
    ops.record_to(nullptr);
    return out.take();
}

// Keeps the heap's freed memory for reuse while alive (glibc): each recording allocates and frees the same
// large zero-filled host buffers (a prefill's read-back, V4's hash tables), which would otherwise be
// mapped, faulted in and unmapped again every time (page faults were the larger part of the record's time).
class HeapReuse {
public:
    HeapReuse() {
#ifdef __GLIBC__
        mallopt(M_MMAP_THRESHOLD, kKeep);
        mallopt(M_TRIM_THRESHOLD, kKeep);
#endif
    }

private:
    static constexpr int kKeep = 256 << 20;  // above the largest of those buffers
};

FamilyOpCalls recorded(const std::string& family, const Reference& ref) {
    static const HeapReuse heap_reuse;
    const SynthArch& arch = synth_arch_find(ref.arch);
    // The tensor list does not depend on the float dtype: made once as released and once dequantized.
    const std::vector<SynthTensor> released = arch.tensors(reference_config(arch, ref, DType::bf16));
    std::vector<SynthTensor> dequantized = released;
    const bool has_quantized = dequantize(dequantized);
    CallSet calls;
    for (const Variant& v : variants(ref, has_quantized)) {
        nlohmann::json config = reference_config(arch, ref, v.dtype);
        std::vector<OpCall> run;
        if (v.option) {  // a config option may change the tensors
            config[v.option->first] = v.option->second;
            run = record(family, config, arch.tensors(config), v, ref);
        } else {
            run = record(family, config, v.dequantized ? dequantized : released, v, ref);
        }
        for (const OpCall& c : run) calls.add(c);
    }
    std::string options;
    for (const auto& [key, value] : ref.options) options += fmt::format(", {} = {}", key, value.dump());
    return {
        .source = fmt::format(
            "recorded: the forward at its real size (coli synth --arch {}), {} layers ({}){}; f32, bf16 and "
            "f16 weights{}, --dense-bits 8 and 4{}",
            ref.arch, ref.layers, ref.layer_kinds, ref.drafts ? ", and its MTP layer's drafts" : "",
            has_quantized ? " (quantized tensors as released, and dequantized)" : "", options),
        .calls = calls.take()};
}

}  // namespace

FamilyOpCalls family_op_calls(const std::string& family) {
    const auto it = references().find(family);
    check(it != references().end(), "model family '{}' has no reference to record its forward at", family);
    return recorded(family, it->second);
}

}  // namespace coli
