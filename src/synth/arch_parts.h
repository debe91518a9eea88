// The parts of a checkpoint's tensor list that several `coli synth` architectures share, written once: a
// list that names tensors under a prefix and stores projections as the release does (in the --dtype, or
// block FP8), and the tensors of MLA (docs/models.md 2, 5.2, 7), the DSA indexer (3), KDA (5.1, 7), SwiGLU
// MLPs, Kimi's layer pattern, and the whole DeepSeek-V3 layout that V3, V3.2 and GLM-5 share.
//
// Value scales follow arch_olmoe.cpp (and its reasons): a unit embedding, 1/sqrt(fan_in) matrices,
// residual branches (o_proj, down_proj) that add ~10% of a stream, router logits of std 3. FP8 weights draw
// codes of unit rms and one f32 scale per block near the matrix's rms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "synth/synth_arch.h"

namespace coli {

// Standard deviations (see the comment at the top of the file).
inline constexpr float kSynthEmbedStd = 1.0f;
inline constexpr float kSynthProjGain = 1.0f;
inline constexpr float kSynthResidualGain = 0.1f;
inline constexpr float kSynthRouterLogitStd = 3.0f;
inline constexpr ValueDist kSynthNormDist{1.0f, 0.05f};
inline constexpr ValueDist kSynthRouterBiasDist{0.0f, 0.01f};  // small next to the sigmoid scores

// How a checkpoint stores a projection: in the --dtype, or block FP8 (docs/models.md 9.4: F8_E4M3
// `<name>.weight` and an F32 `<name>.weight_scale_inv` per 128 x 128 block).
enum class SynthProj { dense, fp8_block };

// The names of a SwiGLU MLP's three projections: gate, up, down.
struct SynthSwigluNames {
    const char* gate;
    const char* up;
    const char* down;
};
inline constexpr SynthSwigluNames kSynthSwiglu{"gate_proj", "up_proj", "down_proj"};
inline constexpr SynthSwigluNames kSynthKimiExpert{"w1", "w3", "w2"};  // docs/models.md 5: a routed expert

// Appends tensors named under one prefix (a layer's, or the model's) to a checkpoint's list.
class SynthTensorList {
public:
    SynthTensorList(std::vector<SynthTensor>& out, std::string prefix, SynthProj proj = SynthProj::dense)
        : out_(out), prefix_(std::move(prefix)), proj_(proj) {}

    // The same list, its projections stored as `proj`.
    SynthTensorList stored_as(SynthProj proj) const { return {out_, prefix_, proj}; }
    const std::string& prefix() const { return prefix_; }

    void add(SynthTensor t);
    // `<name>.weight` [rows, cols] in the --dtype.
    void matrix(const std::string& name, int64_t rows, int64_t cols, float gain);
    // `<name>.weight` [n] near 1, in the --dtype unless `dtype` is given.
    void norm(const std::string& name, int64_t n, std::optional<DType> dtype = std::nullopt);
    // A projection [rows, cols], stored as this list stores them. `start` false keeps it in the shard of the
    // tensor before it (the parts of one expert).
    void proj(const std::string& name, int64_t rows, int64_t cols, float gain, bool start = true);
    // A SwiGLU MLP of width `ff` under `where`, its three projections in one shard.
    void swiglu(const std::string& where, int64_t d, int64_t ff, SynthSwigluNames names = kSynthSwiglu);

private:
    std::vector<SynthTensor>& out_;
    std::string prefix_;
    SynthProj proj_;
};

// MLA under `self_attn.` (docs/models.md 2): the q LoRA (q_a_proj, q_a_layernorm, q_b_proj) when the
// config's q_lora_rank is set, else q_proj; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; and
// K3's output gate g_proj (7) when mla_use_output_gate. `c` holds the MLA keys.
void synth_mla_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d);

// The DSA lightning indexer under `self_attn.indexer.` (docs/models.md 3): wq_b and wk stored as `proj`,
// k_norm (a LayerNorm: weight and bias) F32, weights_proj in the --dtype.
void synth_indexer_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d, SynthProj proj);

// KDA under `self_attn.` (docs/models.md 5.1): q/k/v projections and their short convolutions, the forget
// gate (f_a_proj, f_b_proj, dt_bias, A_log), b_proj, the output gate (g_a_proj and g_b_proj, or K3's
// full-rank g_proj when use_full_rank_gate), o_norm, o_proj. `lin` is linear_attn_config; A_log is stored
// with shape `a_log_shape`, zero past the heads. The convolutions, dt_bias, A_log and o_norm are F32, as
// K3's release stores them (docs/models.md 7).
void synth_kda_tensors(SynthTensorList& t, const nlohmann::json& lin, int64_t d,
                       const std::vector<int64_t>& a_log_shape);

// Kimi's 3:1 pattern (docs/models.md 5, 7): 0-indexed layer L is MLA when L % 4 == 3, and the last one
// is; the others are KDA. Writes linear_attn_config's 1-indexed lists `kda_layers` and `full_attn_layers`.
void synth_kimi_layer_lists(nlohmann::json& lin, int n_layers);
// Whether 0-indexed `layer` is MLA by linear_attn_config's `full_attn_layers`.
bool synth_kimi_is_mla(const nlohmann::json& lin, int layer);

// The DeepSeek-V3 layout (docs/models.md 2) for the config `c`, in the order of transformers' state_dict:
// the embedding; per layer MLA (with the indexer when index_topk is set, its wq_b and wk stored as
// `indexer`), a dense MLP below first_k_dense_replace and else an MoE (routed and shared experts, the
// router with its F32 e_score_correction_bias), the two norms; the final norm, lm_head. Every projection
// of attention, dense MLP and experts is block FP8, as the FP8 releases store them; embedding, router,
// lm_head and norms in the --dtype. The MTP layer is not written (the engine never reads it, 2.5).
std::vector<SynthTensor> synth_deepseek_tensors(const nlohmann::json& c, SynthProj indexer);

}  // namespace coli
