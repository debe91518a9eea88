// `coli synth`: the checkpoint it writes has the real OLMoE layout (names, shapes, config keys, shards
// and index), is reproducible, and is one that `coli info` and `coli run` accept; and its routing is
// spread over the experts (OLMoE and Kimi K3), as docs/design.md requires of a model used to measure caching.
// The Kimi K3 layout is checked in synth_kimi_k3_test.cpp.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <regex>
#include <sstream>

#include "cli/coli_exec.h"
#include "common/process.h"  // last_line
#include "io/checkpoint.h"

namespace coli {
namespace {

// A few-MB OLMoE: hidden 128, expert intermediate 64, vocabulary 3144, 1 head of 128, 2 layers.
const std::vector<std::string> kTinyFlags = {"--scale", "16", "--layers", "2", "--experts", "16"};
constexpr int64_t kTinyHidden = 128, kTinyIntermediate = 64, kTinyVocab = 3144;
constexpr int kTinyExperts = 16;

TEST(Synth, WritesTheRealOlmoeLayout) {
    test::ScratchDir scratch("synth-layout");
    const auto dir = scratch / "model";
    // A small shard limit, so that the model is sharded as large checkpoints are (numbered shards + index).
    std::vector<std::string> flags = kTinyFlags;
    flags.insert(flags.end(), {"--shard-gb", "0.001"});
    test::synth_olmoe(dir, flags, scratch.path());

    const auto ckpt = Checkpoint::open(dir);
    EXPECT_GT(ckpt->file_count(), 1);
    EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
    EXPECT_TRUE(
        std::filesystem::exists(dir / fmt::format("model-00001-of-{:05d}.safetensors", ckpt->file_count())));
    const auto& c = ckpt->config();
    EXPECT_EQ(c["model_type"], "olmoe");
    EXPECT_EQ(c["architectures"][0], "OlmoeForCausalLM");
    EXPECT_EQ(c["hidden_size"], kTinyHidden);
    EXPECT_EQ(c["intermediate_size"], kTinyIntermediate);
    EXPECT_EQ(c["vocab_size"], kTinyVocab);
    EXPECT_EQ(c["num_experts"], kTinyExperts);
    EXPECT_EQ(c["num_experts_per_tok"], 8);
    EXPECT_EQ(c["norm_topk_prob"], false);

    using Shape = std::vector<int64_t>;
    const std::pair<const char*, Shape> expected[] = {
        {"model.embed_tokens.weight", {kTinyVocab, kTinyHidden}},
        {"lm_head.weight", {kTinyVocab, kTinyHidden}},
        {"model.norm.weight", {kTinyHidden}},
        {"model.layers.1.input_layernorm.weight", {kTinyHidden}},
        {"model.layers.1.post_attention_layernorm.weight", {kTinyHidden}},
        {"model.layers.1.self_attn.q_proj.weight", {kTinyHidden, kTinyHidden}},
        {"model.layers.1.self_attn.k_proj.weight", {kTinyHidden, kTinyHidden}},
        {"model.layers.1.self_attn.v_proj.weight", {kTinyHidden, kTinyHidden}},
        {"model.layers.1.self_attn.o_proj.weight", {kTinyHidden, kTinyHidden}},
        {"model.layers.1.self_attn.q_norm.weight", {kTinyHidden}},
        {"model.layers.1.self_attn.k_norm.weight", {kTinyHidden}},
        {"model.layers.1.mlp.gate.weight", {kTinyExperts, kTinyHidden}},
        {"model.layers.1.mlp.experts.15.gate_proj.weight", {kTinyIntermediate, kTinyHidden}},
        {"model.layers.1.mlp.experts.15.up_proj.weight", {kTinyIntermediate, kTinyHidden}},
        {"model.layers.1.mlp.experts.15.down_proj.weight", {kTinyHidden, kTinyIntermediate}},
    };
    for (const auto& [name, shape] : expected) {
        const TensorInfo* t = ckpt->find(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(t->shape, shape) << name;
        EXPECT_EQ(t->dtype, DType::bf16) << name;
    }
    // 2 layers x (4 projections + 2 QK norms + 2 norms + router + 16 experts x 3) + embedding, norm, head.
    EXPECT_EQ(ckpt->tensors().size(), size_t(2 * (4 + 2 + 2 + 1 + kTinyExperts * 3) + 3));
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherBytes) {
    test::ScratchDir scratch("synth-seed");
    const std::vector<std::string> seed1 = {"--seed", "1"}, seed2 = {"--seed", "2"};
    auto flags = [&](const std::vector<std::string>& extra) {
        std::vector<std::string> f = kTinyFlags;
        f.insert(f.end(), extra.begin(), extra.end());
        return f;
    };
    test::synth_olmoe(scratch / "a", flags(seed1), scratch.path());
    test::synth_olmoe(scratch / "b", flags(seed1), scratch.path());
    test::synth_olmoe(scratch / "c", flags(seed2), scratch.path());
    const std::string a = test::file_text(scratch / "a" / "model.safetensors");
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, test::file_text(scratch / "b" / "model.safetensors"));
    EXPECT_NE(a, test::file_text(scratch / "c" / "model.safetensors"));
}

TEST(Synth, RefusesANonEmptyDirectoryAndAnUnknownArch) {
    test::ScratchDir scratch("synth-refuse");
    test::synth_olmoe(scratch / "model", kTinyFlags, scratch.path());
    test::ExecResult again =
        test::coli_exec({"synth", "--out", (scratch / "model").string()}, scratch.path());
    EXPECT_NE(again.exit_code, 0);
    EXPECT_NE(again.err.find("not empty"), std::string::npos) << again.err;
    test::ExecResult unknown =
        test::coli_exec({"synth", "--arch", "nope", "--out", (scratch / "x").string()}, scratch.path());
    EXPECT_NE(unknown.exit_code, 0);
    EXPECT_NE(unknown.err.find("olmoe"), std::string::npos)
        << "the error should list the known archs: " << unknown.err;
}

TEST(Synth, InfoAndRunAcceptTheCheckpoint) {
    test::ScratchDir scratch("synth-run");
    const auto dir = scratch / "model";
    test::synth_olmoe(dir, kTinyFlags, scratch.path());

    const test::ExecResult info =
        test::coli_exec({"info", "-m", dir.string(), "--hot-set", "none"}, scratch.path());
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("olmoe"), std::string::npos) << info.out;

    const test::ExecResult run =
        test::coli_exec({"run", "-m", dir.string(), "--hot-set", "none", "--ids", "1,2,3,4,5", "--max-tokens",
                         "4", "--temperature", "0", "--print-ids"},
                        scratch.path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
    // The last line of stdout: 1 to 4 comma-separated ids inside the vocabulary (fewer than 4 only if
    // greedy decoding reached the end-of-sequence id).
    const std::string last = test::last_line(run.out);
    const std::regex ids_line(R"(\d+(,\d+){0,3})");
    ASSERT_TRUE(std::regex_match(last, ids_line)) << "stdout: " << run.out;
    std::stringstream s(last);
    for (std::string id; std::getline(s, id, ',');) EXPECT_LT(std::stoll(id), kTinyVocab);
}

// Routing statistics from `coli run`'s stderr.
struct RoutingFigures {
    double distinct_per_layer = -1, consecutive_shared = -1;
};

RoutingFigures routing_parse(const std::string& err) {
    const std::regex line(
        R"(routing: ([0-9.]+) distinct experts per layer, ([0-9.]+) shared by consecutive)");
    std::smatch m;
    RoutingFigures f;
    if (std::regex_search(err, m, line)) f = {std::stod(m[1]), std::stod(m[2])};
    return f;
}

// docs/design.md: a random model with small embeddings routes nearly every token to the same experts, which
// makes any cache look perfect. Over 40 tokens, uniform routing over 64 experts with top-8 uses ~63.7
// distinct experts per layer and shares k*k/E = 1 expert between consecutive tokens; a collapsed router
// uses a small multiple of k and shares most of them.
TEST(Synth, RoutingIsSpread) {
    test::ScratchDir scratch("synth-routing");
    const auto dir = scratch / "model";
    test::synth_olmoe(dir, {"--scale", "8", "--layers", "2"}, scratch.path());  // 64 experts, top-8
    const test::ExecResult run = test::coli_exec(
        {"run", "-m", dir.string(), "--hot-set", "none", "--ids", "17,4242,99,1000,5,6000,321,77",
         "--max-tokens", "32", "--ignore-eos", "--temperature", "0", "--ctx", "64"},
        scratch.path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const RoutingFigures f = routing_parse(run.err);
    ASSERT_GE(f.distinct_per_layer, 0) << "no routing line in stderr: " << run.err;
    constexpr int kTopK = 8;
    constexpr double kMinDistinct = 6 * kTopK;  // of 64; uniform gives ~63.7, collapse ~2-3 x k
    constexpr double kMaxShared = 2.5;          // uniform gives k*k/E = 1, collapse ~k
    EXPECT_GE(f.distinct_per_layer, kMinDistinct) << run.err;
    EXPECT_LE(f.consecutive_shared, kMaxShared) << run.err;
}

// The same for Kimi K3 (LatentMoE, sigmoid router with top-16, MXFP4 experts), run through its loader.
TEST(Synth, RoutingIsSpreadForKimiK3) {
    test::ScratchDir scratch("synth-routing-k3");
    const auto dir = scratch / "model";
    const test::ExecResult synth = test::coli_exec({"synth", "--arch", "kimi_k3", "--out", dir.string(),
                                                    "--scale", "16", "--layers", "2", "--experts", "128"},
                                                   scratch.path());
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    const test::ExecResult run = test::coli_exec(
        {"run", "-m", dir.string(), "--hot-set", "none", "--ids", "17,4242,99,1000,5,6000,321,77",
         "--max-tokens", "32", "--ignore-eos", "--temperature", "0", "--ctx", "64"},
        scratch.path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const RoutingFigures f = routing_parse(run.err);
    ASSERT_GE(f.distinct_per_layer, 0) << "no routing line in stderr: " << run.err;
    constexpr int kTopK = 16;
    constexpr double kMinDistinct = 6 * kTopK;  // of 128; uniform gives ~127.4, collapse ~2-3 x k
    constexpr double kMaxShared = 5;            // uniform gives k*k/E = 2, collapse ~k
    EXPECT_GE(f.distinct_per_layer, kMinDistinct) << run.err;
    EXPECT_LE(f.consecutive_shared, kMaxShared) << run.err;
}

}  // namespace
}  // namespace coli
