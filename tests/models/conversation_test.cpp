// Conversation::generate on the bundled demo model: greedy determinism, KV-cache prefix reuse that changes
// nothing, stop strings, cancellation, and a clean state after an error (what `coli serve` relies on).
#include "runtime/conversation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "runtime/engine.h"

namespace coli {
namespace {

Engine& demo_engine() {
    static Engine engine([] {
        EngineOptions o;
        o.backend = "cpu";
        o.model_dir = std::string(COLI_SOURCE_DIR) + "/models/demo";
        o.hot_set = "none";
        return o;
    }());
    return engine;
}

constexpr int kTokens = 12;

GenerateResult greedy(Conversation& c, const std::vector<int32_t>& ids, bool chat,
                      GenerateOptions opts = {kTokens, {}, false},
                      const std::function<bool(const std::string&)>& on_text = {}) {
    Sampler sampler(SamplerOptions{});
    return c.generate(ids, chat, opts, sampler, on_text);
}

TEST(Conversation, GreedyTextIsStreamedWhole) {
    Conversation c(demo_engine().model(), demo_engine().checkpoint(), true);
    std::string streamed;
    int calls = 0;
    const GenerateResult r = greedy(c, c.text().prompt_ids("In the beginning God created"), false,
                                    {kTokens, {}, true}, [&](const std::string& piece) {
                                        streamed += piece;
                                        ++calls;
                                        return true;
                                    });
    EXPECT_EQ(r.completion_tokens, kTokens);
    EXPECT_EQ(r.finish, FinishReason::length);
    EXPECT_FALSE(r.text.empty());
    EXPECT_EQ(streamed, r.text);
    EXPECT_GE(calls, kTokens);  // once per token, at least
}

TEST(Conversation, PrefixReuseGivesTheSameTokensAsAFreshStart) {
    Conversation reused(demo_engine().model(), demo_engine().checkpoint(), true);
    const std::vector<text::ChatMessage> first = {{"user", "Who created the heaven?"}};
    const GenerateResult a = greedy(reused, reused.text().chat_ids(first), true);
    std::vector<text::ChatMessage> second = first;
    second.push_back({"assistant", a.text});
    second.push_back({"user", "And then?"});
    const GenerateResult b = greedy(reused, reused.text().chat_ids(second), true);

    Conversation fresh(demo_engine().model(), demo_engine().checkpoint(), true);
    const GenerateResult b_fresh = greedy(fresh, fresh.text().chat_ids(second), true);
    EXPECT_EQ(b_fresh.cached_tokens, 0);
    EXPECT_EQ(b.text, b_fresh.text);
    EXPECT_EQ(b.prompt_tokens, b_fresh.prompt_tokens);
    // The demo template renders the reply as it was generated, so the first turn's cache is reused.
    EXPECT_GT(b.cached_tokens, 0);
}

TEST(Conversation, StopStringCutsTheText) {
    Conversation c(demo_engine().model(), demo_engine().checkpoint(), false);
    const std::vector<int32_t> ids = c.text().prompt_ids("In the beginning God created");
    const GenerateResult full = greedy(c, ids, false, {kTokens, {}, true});
    const size_t space = full.text.find(' ', 1);
    ASSERT_NE(space, std::string::npos) << full.text;
    const std::string stop = full.text.substr(space, 3);
    const GenerateResult cut = greedy(c, ids, false, {kTokens, {stop}, true});
    EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
    EXPECT_EQ(cut.finish, FinishReason::stop);
    EXPECT_EQ(cut.stop_matched, stop);
    EXPECT_LT(cut.completion_tokens, kTokens);
}

TEST(Conversation, OnTextReturningFalseCancels) {
    Conversation c(demo_engine().model(), demo_engine().checkpoint(), false);
    int calls = 0;
    const GenerateResult r = greedy(c, c.text().prompt_ids("In the beginning"), false, {kTokens, {}, true},
                                    [&](const std::string&) { return ++calls < 3; });
    EXPECT_EQ(r.finish, FinishReason::cancelled);
    EXPECT_EQ(r.completion_tokens, 3);
    EXPECT_EQ(calls, 3);
}

TEST(Conversation, AnErrorLeavesNoStaleCache) {
    Conversation c(demo_engine().model(), demo_engine().checkpoint(), false);
    const std::vector<int32_t> ids = c.text().prompt_ids("In the beginning God created");
    const GenerateResult before = greedy(c, ids, false);
    // More tokens than the context holds: the model throws in the middle of the generation.
    const int64_t ctx = demo_engine().model().summary().max_ctx;
    EXPECT_COLI_ERROR(greedy(c, ids, false, {static_cast<int>(ctx), {}, true}), "context");
    const GenerateResult after = greedy(c, ids, false);
    EXPECT_EQ(after.text, before.text);
    EXPECT_EQ(after.cached_tokens, 0);
}

}  // namespace
}  // namespace coli
