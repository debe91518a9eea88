// Every oracle fixture on every available backend other than the CPU (the CPU runs them in tests/models):
// logits within the oracle tolerance, the same argmax, and the same greedy continuation
// (docs/design.md rule 2). Where no such backend is available (CI), the test is skipped loudly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backend/registry.h"
#include "common/batch_check.h"
#include "common/drafting_synth.h"
#include "common/fixture.h"
#include "common/test_util.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace coli {
namespace {

// Each backend's bound on max|logit diff| / max|logit| against transformers over every fixture, with the
// measured worst cases it rests on (kimi_k3's reference runs a chunked KDA that differs from the exact
// recurrence by about 1.5e-5); the test prints every fixture's figure.
// Vulkan: lavapipe kimi_k3 1.55e-5, every other fixture 2.6e-6 at most; an H200 kimi_k3 1.7e-5.
constexpr double kVulkanLogitTolerance = 1e-4;
// CUDA: an H200 kimi_k3 6.4e-5, deepseek_v3_fp8 1.0e-6.
constexpr double kCudaLogitTolerance = 2e-4;

double logit_tolerance(const std::string& backend) {
    if (backend == "vulkan") return kVulkanLogitTolerance;
    if (backend == "cuda") return kCudaLogitTolerance;
    ADD_FAILURE() << "no measured logit tolerance for backend " << backend << ": measure one and add it here";
    return 0;
}

std::vector<std::string> device_backends() {
    std::vector<std::string> names;
    for (const BackendInfo& b : backend_list())
        if (b.available && b.name != "cpu") names.push_back(b.name);
    return names;
}

// The device backends available here; the caller skips loudly when there are none.
std::vector<std::string> device_backends_or_why(std::string& why) {
    const std::vector<std::string> backends = device_backends();
    if (backends.empty())
        for (const BackendInfo& b : backend_list())
            if (b.name != "cpu") why += fmt::format("\n  {}: {}", b.name, b.detail);
    return backends;
}

TEST(BackendOracle, EveryFixtureOnEveryDeviceBackend) {
    std::string why;
    const std::vector<std::string> backends = device_backends_or_why(why);
    if (backends.empty()) GTEST_SKIP() << "SKIPPED: no device backend available here:" << why;
    for (const std::string& backend : backends)
        for (const char* name : test::kOracleFixtures)
            for (int cache : {0, 1}) {
                SCOPED_TRACE(fmt::format("{} on {}, expert cache {}", name, backend, cache));
                const test::Fixture fx = test::fixture_load(name);
                EngineOptions o;
                o.model_dir = fx.dir;
                o.backend = backend;
                o.expert_cache = cache;
                o.hot_set = "none";
                Engine engine(o);
                {
                    Session session(engine.model());
                    const std::vector<float> logits = session.forward(fx.input_ids, true);
                    const double diff = test::max_rel_diff(logits, fx.logits);
                    fmt::print("{} on {}, expert cache {}: max|logit diff| / max|logit| = {:.2e}\n", name,
                               backend, cache, diff);
                    EXPECT_LE(diff, logit_tolerance(backend));
                    EXPECT_EQ(test::argmax_rows(logits, fx.vocab), test::argmax_rows(fx.logits, fx.vocab));
                }
                Session session(engine.model());
                Sampler greedy(SamplerOptions{});
                EXPECT_EQ(session.generate(fx.input_ids, static_cast<int>(fx.greedy.size()), greedy, {}),
                          fx.greedy);
                EXPECT_EQ(engine.ops().counters().total_fallbacks(), 0u) << engine.ops().counters().summary();
            }
}

// A device kernel may pick another path for another row count (a batch's matmul against a decode step's), so
// a batched row can differ from its alone value in the last bits; the tokens may not. Measured on lavapipe:
// olmoe_gqa 6.1e-7, deepseek_v32 1.0e-6, kimi_k3 4.0e-6, deepseek_v4 1.0e-6.
constexpr double kBatchTolerance = 1e-5;

// Continuous batching on each device backend (tests/common/batch_check.h), on one fixture per kind of
// per-sequence state (GQA's KV cache; MLA latents with DSA's indexer keys; KDA's recurrent and convolution
// states; DeepSeek-V4's ring, compressed entries and partial windows): every sequence of a batch gets its
// alone logits to rounding, and the same greedy tokens.
TEST(BackendOracle, BatchedSequencesGetTheirAloneLogits) {
    std::string why;
    const std::vector<std::string> backends = device_backends_or_why(why);
    if (backends.empty()) GTEST_SKIP() << "SKIPPED: no device backend available here:" << why;
    for (const std::string& backend : backends)
        for (const char* name : {"olmoe_gqa", "deepseek_v32", "kimi_k3", "deepseek_v4"}) {
            SCOPED_TRACE(fmt::format("{} on {}", name, backend));
            const test::Fixture fx = test::fixture_load(name);
            EngineOptions o;
            o.model_dir = fx.dir;
            o.backend = backend;
            o.hot_set = "none";
            Engine engine(o);
            const test::BatchComparison c = test::batch_compare(engine.model(), fx.input_ids, fx.vocab);
            fmt::print("{} on {}: batched against alone, max relative difference {:.2e}{}\n", name, backend,
                       c.max_rel_diff, c.bitwise ? " (bit for bit)" : "");
            EXPECT_TRUE(c.same_inputs);
            EXPECT_LE(c.max_rel_diff, kBatchTolerance);
            EXPECT_EQ(engine.ops().counters().total_fallbacks(), 0u) << engine.ops().counters().summary();
        }
}

// The drafting checkpoints' prompt (tests/common/drafting_synth.h): ids spread over their vocabularies.
constexpr int kDraftTokens = 12;
constexpr uint32_t kIdMultiplier = 2654435761u;

// Speculative decoding on each device backend, for each family that drafts: the MTP layer's draft logits
// after a prompt are the CPU's to the backend's tolerance, and greedy tokens with drafts are those without.
TEST(BackendOracle, DraftsAreTheCpusAndChangeNoToken) {
    std::string why;
    const std::vector<std::string> backends = device_backends_or_why(why);
    if (backends.empty()) GTEST_SKIP() << "SKIPPED: no device backend available here:" << why;
    const test::TempDir dir("drafts");
    for (const char* arch : test::kDraftingArchs) {
        const SynthOptions so = test::drafting_synth(dir.path(), arch);
        const int64_t vocab = synth_arch_find(arch).config(so)["vocab_size"].get<int64_t>();
        std::vector<int32_t> prompt;
        for (uint32_t t = 1; t <= kDraftTokens; ++t)
            prompt.push_back(static_cast<int32_t>(t * kIdMultiplier % vocab));
        // The draft logits after the prompt, its last token followed by `next`.
        const auto draft_after_prompt = [&](Engine& engine) {
            Session session(engine.model());
            session.forward(prompt, false);
            const std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
            return engine.ops().read(engine.model().draft(next, session.state()));
        };
        EngineOptions o;
        o.model_dir = so.out;
        o.backend = "cpu";
        o.hot_set = "none";
        o.speculate = true;
        o.max_ctx = 2 * kDraftTokens;
        Engine cpu(o);
        const std::vector<float> want = draft_after_prompt(cpu);
        for (const std::string& backend : backends) {
            SCOPED_TRACE(fmt::format("{} on {}", arch, backend));
            o.backend = backend;
            Engine engine(o);
            const double diff = test::max_rel_diff(draft_after_prompt(engine), want);
            fmt::print("{} on {}: draft logits against the cpu's, max relative difference {:.2e}\n", arch,
                       backend, diff);
            EXPECT_LE(diff, logit_tolerance(backend));
            Sampler greedy(SamplerOptions{});
            Session plain(engine.model()), drafted(engine.model());
            plain.speculate(false);
            EXPECT_EQ(drafted.generate(prompt, kDraftTokens, greedy, {}),
                      plain.generate(prompt, kDraftTokens, greedy, {}));
            EXPECT_GT(drafted.last_stats().drafts.drafted, 0);
            EXPECT_EQ(engine.ops().counters().total_fallbacks(), 0u) << engine.ops().counters().summary();
        }
    }
}

}  // namespace
}  // namespace coli
