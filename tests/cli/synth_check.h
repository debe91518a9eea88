// What the tests of `coli synth`'s architectures share: a checkpoint synthesized once per test suite, its
// tensors compared with the list a test writes out from docs/models.md, and the routing-spread check of a
// CPU run (docs/design.md: a random model with small embeddings routes every token to the same experts).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/coli_exec.h"
#include "common/process.h"
#include "core/dtype.h"
#include "io/checkpoint.h"

namespace coli::test {

// One tensor as docs/models.md says the checkpoint stores it.
struct ExpectedTensor {
    DType dtype;
    std::vector<int64_t> shape;
};

inline constexpr int64_t kFp8Block = 128;  // FP8 block scales: one per 128 x 128 (docs/models.md 9.4)

inline int64_t fp8_blocks(int64_t n) {
    return (n + kFp8Block - 1) / kFp8Block;
}

// Every tensor of the checkpoint is in `want` with its dtype and shape, and every one of `want` is there.
inline void expect_tensors(const Checkpoint& ckpt, const std::map<std::string, ExpectedTensor>& want) {
    std::set<std::string> got;
    for (const TensorInfo& t : ckpt.tensors()) {
        got.insert(t.name);
        const auto it = want.find(t.name);
        if (it == want.end()) {
            ADD_FAILURE() << "unexpected tensor " << t.name;
            continue;
        }
        EXPECT_EQ(t.dtype, it->second.dtype) << t.name;
        EXPECT_EQ(t.shape, it->second.shape) << t.name;
    }
    for (const auto& [name, e] : want) EXPECT_TRUE(got.count(name)) << "missing " << name;
}

// The widths of a checkpoint in DeepSeek-V3's layout (docs/models.md 2; GLM-5 runs the same code, 4).
struct DeepseekWidths {
    int64_t d_model, vocab, heads, q_lora, kv_lora, nope, rope, v, dense_ffn, expert_ffn;
    int layers, dense_layers, experts;  // the first dense_layers layers have a dense MLP; one shared expert
    int mtp_layers = 1;                 // multi-token-prediction layers after them (docs/models.md 2.5)
};

// docs/models.md 2's tensor list as 9.4's FP8 release stores it: every projection of attention and MLPs
// F8_E4M3 with an F32 `<name>_scale_inv` per 128 x 128 block; embedding, norms, router and lm_head BF16,
// the router's selection bias F32. The MTP layers after the decoder's are MoE layers with their own norms and
// eh_proj in BF16.
inline std::map<std::string, ExpectedTensor> deepseek_fp8_tensors(const DeepseekWidths& w) {
    const DType bf = DType::bf16, f32 = DType::f32, fp8 = DType::f8_e4m3;
    std::map<std::string, ExpectedTensor> t;
    const auto proj = [&](const std::string& name, int64_t out, int64_t in) {
        t[name + ".weight"] = {fp8, {out, in}};
        t[name + ".weight_scale_inv"] = {f32, {fp8_blocks(out), fp8_blocks(in)}};
    };
    const auto swiglu = [&](const std::string& p, int64_t ff) {
        proj(p + "gate_proj", ff, w.d_model);
        proj(p + "up_proj", ff, w.d_model);
        proj(p + "down_proj", w.d_model, ff);
    };
    t["model.embed_tokens.weight"] = {bf, {w.vocab, w.d_model}};
    t["model.norm.weight"] = {bf, {w.d_model}};
    t["lm_head.weight"] = {bf, {w.vocab, w.d_model}};
    for (int l = 0; l < w.layers + w.mtp_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        if (l >= w.layers) {
            for (const char* norm : {"enorm", "hnorm", "shared_head.norm"})
                t[p + norm + ".weight"] = {bf, {w.d_model}};
            t[p + "eh_proj.weight"] = {bf, {w.d_model, 2 * w.d_model}};
        }
        t[p + "input_layernorm.weight"] = {bf, {w.d_model}};
        t[p + "post_attention_layernorm.weight"] = {bf, {w.d_model}};
        proj(p + "self_attn.q_a_proj", w.q_lora, w.d_model);
        t[p + "self_attn.q_a_layernorm.weight"] = {bf, {w.q_lora}};
        proj(p + "self_attn.q_b_proj", w.heads * (w.nope + w.rope), w.q_lora);
        proj(p + "self_attn.kv_a_proj_with_mqa", w.kv_lora + w.rope, w.d_model);
        t[p + "self_attn.kv_a_layernorm.weight"] = {bf, {w.kv_lora}};
        proj(p + "self_attn.kv_b_proj", w.heads * (w.nope + w.v), w.kv_lora);
        proj(p + "self_attn.o_proj", w.d_model, w.heads * w.v);
        if (l < w.dense_layers) {
            swiglu(p + "mlp.", w.dense_ffn);
            continue;
        }
        t[p + "mlp.gate.weight"] = {bf, {w.experts, w.d_model}};
        t[p + "mlp.gate.e_score_correction_bias"] = {f32, {w.experts}};
        for (int e = 0; e < w.experts; ++e)
            swiglu(p + "mlp.experts." + std::to_string(e) + ".", w.expert_ffn);
        swiglu(p + "mlp.shared_experts.", w.expert_ffn);
    }
    return t;
}

// A suite whose tests read one checkpoint that `coli synth` writes once, before the first of them.
// Suite is the derived fixture (each gets its own checkpoint); its SetUpTestSuite calls synth().
template <class Suite>
class SynthCheckpointTest : public ::testing::Test {
protected:
    // Writes the checkpoint with `coli synth --out DIR flags...` and opens it.
    static void synth(const std::string& scratch_name, const std::vector<std::string>& flags) {
        scratch_ = new ScratchDir(scratch_name);
        std::vector<std::string> args = {"synth", "--out", (*scratch_ / "model").string()};
        args.insert(args.end(), flags.begin(), flags.end());
        const ExecResult r = coli_exec(args, scratch_->path());
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ckpt_ = Checkpoint::open(*scratch_ / "model").release();
    }
    static void TearDownTestSuite() {
        delete ckpt_;
        delete scratch_;
        ckpt_ = nullptr;
        scratch_ = nullptr;
    }
    void SetUp() override { ASSERT_NE(ckpt_, nullptr) << "coli synth failed"; }

    static inline ScratchDir* scratch_ = nullptr;
    static inline Checkpoint* ckpt_ = nullptr;
};

// The routing line `coli run` prints: at least min_distinct experts per layer over the run, at most
// max_shared of them shared by consecutive tokens (uniform routing gives ~E and k*k/E; a collapsed
// router a small multiple of k, and nearly k shared).
inline void expect_routing_spread(const std::string& err, double min_distinct, double max_shared) {
    const std::regex line(
        R"(routing: ([0-9.]+) distinct experts per layer, ([0-9.]+) shared by consecutive)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(err, m, line)) << "no routing line in stderr: " << err;
    EXPECT_GE(std::stod(m[1]), min_distinct) << err;
    EXPECT_LE(std::stod(m[2]), max_shared) << err;
}

// `coli synth --arch ARCH --scale 16 --layers 4 --experts 64`, then 8 prompt ids and 32 greedy tokens on the
// CPU: the run succeeds, prints 32 ids inside the vocabulary, and routes with spread (over 40 tokens, uniform
// routing over 64 experts with top-8 uses ~63.7 distinct experts per layer and shares k*k/E = 1 between
// consecutive tokens; a collapsed router uses a small multiple of k and shares most of them). Returns the
// run's stderr, for the family's own checks.
inline std::string synth_run_with_routing_spread(const std::string& arch, int64_t vocab) {
    constexpr int kTokens = 32, kTopK = 8;
    constexpr double kMinDistinct = 6 * kTopK;  // of 64; uniform gives ~63.7, collapse ~2-3 x k
    constexpr double kMaxShared = 2.5;          // uniform gives k*k/E = 1, collapse ~k
    ScratchDir scratch("synth-" + arch + "-run");
    const auto dir = scratch / "model";
    const ExecResult synth = coli_exec(
        {"synth", "--arch", arch, "--out", dir.string(), "--scale", "16", "--layers", "4", "--experts", "64"},
        scratch.path());
    EXPECT_EQ(synth.exit_code, 0) << synth.err;
    const ExecResult run =
        coli_exec({"run", "-m", dir.string(), "--hot-set", "none", "--backend", "cpu", "--ids",
                   "17,4242,99,1000,5,6000,321,77", "--max-tokens", std::to_string(kTokens), "--ignore-eos",
                   "--temperature", "0", "--ctx", "64", "--print-ids"},
                  scratch.path());
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::stringstream ids(last_line(run.out));
    int count = 0;
    for (std::string id; std::getline(ids, id, ',');) {
        EXPECT_LT(std::stoll(id), vocab);
        ++count;
    }
    EXPECT_EQ(count, kTokens) << run.out;
    expect_routing_spread(run.err, kMinDistinct, kMaxShared);
    return run.err;
}

}  // namespace coli::test
