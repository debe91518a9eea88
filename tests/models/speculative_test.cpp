// Speculative decoding: the acceptance rule keeps the model's distribution whatever the drafts' (runtime/
// speculative.h), and Session::generate, given drafts that are right at every other position, chooses plain
// decoding's greedy tokens and leaves the state where plain decoding leaves it, on every fixture whose state
// can drop positions.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/drafting_synth.h"
#include "common/fixture.h"
#include "common/test_util.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace coli {
namespace {

constexpr int64_t kCtx = 128;     // enough for a fixture's prompt and the tokens below
constexpr int kNewTokens = 12;    // generated per run
constexpr int kTrials = 200'000;  // draws of the distribution test

TEST(Speculative, TheRuleKeepsTheModelsDistributionWhateverTheDrafts) {
    const std::vector<double> p = {0.5, 0.3, 0.2, 0.0}, q = {0.1, 0.2, 0.3, 0.4};
    Sampler sampler(SamplerOptions{.temperature = 1, .seed = 7});
    std::array<int, 4> count{};
    int accepted = 0;
    for (int t = 0; t < kTrials; ++t) {
        const int32_t d = sampler.draw(q);
        const DraftVerdict v = draft_verdict(p, q, d, sampler);
        EXPECT_TRUE(!v.accepted || v.token == d);
        ++count[v.token];
        accepted += v.accepted;
    }
    // One standard deviation of a share is at most 0.5 / sqrt(kTrials) = 0.0011.
    for (size_t i = 0; i < p.size(); ++i)
        EXPECT_NEAR(double(count[i]) / kTrials, p[i], 0.005) << "token " << i;
    EXPECT_NEAR(double(accepted) / kTrials, 0.5, 0.005);  // sum of min(p, q)
}

TEST(Speculative, GreedyKeepsADraftExactlyWhenItIsTheArgmax) {
    Sampler greedy(SamplerOptions{});
    const std::vector<float> logits = {0.1f, 2.0f, 1.0f};
    const std::vector<double> p = greedy.probabilities(logits);
    EXPECT_EQ(p, (std::vector<double>{0, 1, 0}));
    const DraftVerdict right = draft_verdict(p, greedy.probabilities(logits), 1, greedy);
    EXPECT_TRUE(right.accepted);
    const DraftVerdict wrong = draft_verdict(p, greedy.probabilities(std::vector<float>{0, 0, 5}), 2, greedy);
    EXPECT_FALSE(wrong.accepted);
    EXPECT_EQ(wrong.token, 1);
}

// A model that drafts from a script: the token the script has at the drafted position where that position is
// even, another one where it is odd; it also records whether each draft call paired the rows with the
// tokens the script says followed them.
class ScriptedDrafts final : public Model {
public:
    ScriptedDrafts(Model& model, std::vector<int32_t> script) : model_(model), script_(std::move(script)) {}

    const ModelSummary& summary() const override { return model_.summary(); }
    std::unique_ptr<ModelState> state_new() override { return model_.state_new(); }
    Tensor forward(std::span<const int32_t> ids, ModelState& state, bool all_logits) override {
        state.hidden_pos0 = state.n_past;
        return model_.forward(ids, state, all_logits);
    }
    Tensor forward_batch(std::span<const SequenceStep> steps) override { return model_.forward_batch(steps); }
    bool drafts() const override { return true; }
    Tensor draft(std::span<const DraftStep> steps) override {
        EXPECT_EQ(steps.size(), 1u) << "a session drafts for itself alone";
        const std::span<const int32_t> next = steps[0].next;
        const ModelState& state = *steps[0].state;
        for (size_t i = 0; i < next.size(); ++i) misplaced_ += next[i] != at(state.hidden_pos0 + 1 + i);
        const int64_t pos = state.hidden_pos0 + static_cast<int64_t>(next.size()) + 1;  // after next.back()
        const int64_t vocab = summary().vocab;
        const int32_t guess = pos % 2 == 0 ? at(pos) : static_cast<int32_t>((at(pos) + 1) % vocab);
        std::vector<float> logits(static_cast<size_t>(vocab), 0.0f);
        logits[static_cast<size_t>(guess)] = 1;
        return model_.ops().tensor_from(1, vocab, logits);
    }
    ExpertStore& store() override { return model_.store(); }
    Ops& ops() override { return model_.ops(); }

    int misplaced() const { return misplaced_; }  // next tokens that were not the script's

private:
    int32_t at(int64_t pos) const { return pos < int64_t(script_.size()) ? script_[size_t(pos)] : 0; }

    Model& model_;
    std::vector<int32_t> script_;
    int misplaced_ = 0;
};

// A CPU engine's options for a checkpoint (no routing history: nothing written into the source tree).
EngineOptions cpu_options(const std::filesystem::path& dir) {
    EngineOptions o;
    o.model_dir = dir;
    o.backend = "cpu";
    o.hot_set = "none";
    return o;
}

// Whether every tensor of the model's state follows positions, so that dropping positions is lowering n_past.
bool drops_positions(Model& model) {
    for (const StateTensor& t : model.state_new()->tensors())
        if (t.positions_per_row != 1) return false;
    return true;
}

TEST(Speculative, GreedyTokensAndTheStateAreThoseOfPlainDecoding) {
    int checked = 0;
    for (const char* name : test::kOracleFixtures) {
        const test::Fixture f = test::fixture_load(name);
        EngineOptions o = cpu_options(f.dir);
        o.max_ctx = kCtx;
        Engine engine(o);
        if (!drops_positions(engine.model())) continue;  // recurrent layers: no family of them drafts
        SCOPED_TRACE(name);
        ++checked;
        Sampler greedy(SamplerOptions{});
        Session plain(engine.model());
        const std::vector<int32_t> want = plain.generate(f.input_ids, kNewTokens, greedy, {});
        const int64_t plain_past = plain.n_past();
        const std::vector<float> plain_next = plain.forward(std::span(want).last(1), false);

        std::vector<int32_t> script = f.input_ids;
        script.insert(script.end(), want.begin(), want.end());
        ScriptedDrafts drafting(engine.model(), script);
        Session spec(drafting);
        ASSERT_TRUE(spec.speculates());
        EXPECT_EQ(spec.generate(f.input_ids, kNewTokens, greedy, {}), want);
        const DraftStats& d = spec.last_stats().drafts;
        EXPECT_GT(d.accepted, 0);
        EXPECT_LT(d.accepted, d.drafted);
        EXPECT_EQ(drafting.misplaced(), 0);
        EXPECT_EQ(spec.n_past(), plain_past);
        const std::vector<float> spec_next = spec.forward(std::span(want).last(1), false);
        EXPECT_LE(test::max_rel_diff(spec_next, plain_next), 1e-5);

        // A stop id ends both where it first comes, accepted draft or not.
        for (const int at : {3, 4}) {
            const int32_t stop[] = {want[at]};
            Session plain_stop(engine.model()), spec_stop(drafting);
            const std::vector<int32_t> cut = plain_stop.generate(f.input_ids, kNewTokens, greedy, stop);
            EXPECT_EQ(spec_stop.generate(f.input_ids, kNewTokens, greedy, stop), cut);
            EXPECT_EQ(spec_stop.n_past(), plain_stop.n_past());
        }
    }
    EXPECT_GE(checked, 9);  // the OLMoE and DeepSeek-V3 fixtures (V4's and Kimi's states are recurrent)
}

// The MTP layer against transformers (tests/fixtures/deepseek_v3_mtp: DeepSeek-V3 with the layer at
// model.layers.3, its draft logits from transformers' own decoder layer and norms): after each prefix
// t_0 .. t_n of the prompt, the draft for the pairs (h_i, t_{i+1}), i < n, gives the oracle's row n - 1,
// and greedy decoding with the layer's drafts gives transformers' greedy tokens.
TEST(Speculative, TheDraftLayerIsTransformers) {
    const test::Fixture f = test::fixture_load("deepseek_v3_mtp");
    const auto n_prompt = static_cast<int64_t>(f.input_ids.size());
    ASSERT_EQ(static_cast<int64_t>(f.mtp_logits.size()), (n_prompt - 1) * f.vocab);
    EngineOptions o = cpu_options(f.dir);
    o.speculate = true;
    Engine engine(o);
    std::vector<float> drafts;  // [T - 1, vocab]
    for (int64_t n = 1; n < n_prompt; ++n) {
        Session s(engine.model());
        s.forward(std::span(f.input_ids).first(n + 1), false);
        const std::vector<int32_t> next(f.input_ids.begin() + 1, f.input_ids.begin() + n + 1);
        const std::vector<float> row = engine.ops().read(engine.model().draft(next, s.state()));
        drafts.insert(drafts.end(), row.begin(), row.end());
    }
    const double diff = test::max_rel_diff(drafts, f.mtp_logits);
    fmt::print("draft logits against transformers': max|diff| / max|logit| = {:.2e}\n", diff);
    EXPECT_LE(diff, test::kCpuLogitTolerance);
    EXPECT_EQ(test::argmax_rows(drafts, f.vocab), test::argmax_rows(f.mtp_logits, f.vocab));

    Session spec(engine.model());
    spec.speculate(true);
    Sampler greedy(SamplerOptions{});
    EXPECT_EQ(spec.generate(f.input_ids, static_cast<int>(f.greedy.size()), greedy, {}), f.greedy);
    EXPECT_GT(spec.last_stats().drafts.drafted, 0);
}

TEST(Speculative, AModelWithoutADraftLayerIsRefusedByName) {
    for (const auto& [name, fragment] :
         {std::pair{"deepseek_v3", "no multi-token-prediction layer to draft with"},
          std::pair{"olmoe_base", "runs for deepseek_v3, deepseek_v32, glm_moe_dsa only"}}) {
        EngineOptions o = cpu_options(test::fixture_load(name).dir);
        o.speculate = true;
        EXPECT_COLI_ERROR(Engine{o}, fragment);
    }
}

// The server drafts for every sequence of a step in one pass: on a synthesized DeepSeek-V3 and GLM-5 (with
// their MTP layers), each sequence's draft logits in a batch of three are, bit for bit on the CPU, those it
// gets alone, and the batch leaves each draft cache as drafting alone does (the next drafts agree too).
TEST(Speculative, BatchedDraftsAreEachSequencesAloneBitForBit) {
    const test::TempDir dir("drafts-batched");
    for (const char* arch : {"deepseek_v3", "glm_moe_dsa"}) {
        SCOPED_TRACE(arch);
        EngineOptions o = cpu_options(test::drafting_synth(dir.path(), arch).out);
        o.max_ctx = kCtx;
        o.speculate = true;
        Engine engine(o);
        Model& model = engine.model();
        // Three prompts of different lengths, then two more tokens each.
        const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 7}, {11, 3}, {8, 1, 6, 4, 10, 12}};
        const auto run = [&](bool batched) {
            std::vector<std::unique_ptr<ModelState>> states;
            std::vector<float> out;
            for (size_t i = 0; i < prompts.size(); ++i) states.push_back(model.state_new());
            for (int round = 0; round < 2; ++round) {
                std::vector<std::vector<int32_t>> next(prompts.size());
                for (size_t i = 0; i < prompts.size(); ++i) {
                    const std::vector<int32_t> ids =
                        round == 0 ? prompts[i] : std::vector<int32_t>{static_cast<int32_t>(20 + i)};
                    model.forward(ids, *states[i], false);
                    next[i].assign(ids.begin() + 1, ids.end());
                    next[i].push_back(static_cast<int32_t>(30 + i));
                }
                std::vector<float> logits;
                if (batched) {
                    std::vector<DraftStep> steps;
                    for (size_t i = 0; i < prompts.size(); ++i) steps.push_back({next[i], states[i].get()});
                    logits = engine.ops().read(model.draft(steps));
                } else {
                    for (size_t i = 0; i < prompts.size(); ++i) {
                        const std::vector<float> one = engine.ops().read(model.draft(next[i], *states[i]));
                        logits.insert(logits.end(), one.begin(), one.end());
                    }
                }
                out.insert(out.end(), logits.begin(), logits.end());
            }
            return out;
        };
        const std::vector<float> alone = run(false), together = run(true);
        ASSERT_EQ(alone.size(), together.size());
        EXPECT_TRUE(alone == together) << "max relative difference " << test::max_rel_diff(together, alone);
    }
}

}  // namespace
}  // namespace coli
