// The prefix cache (runtime/prefix_cache.h) on every family's oracle fixture, on the CPU: a prompt whose
// prefix is restored from the cache (from RAM, and from its file in a new cache after a "restart") gives
// the greedy tokens of a clean run, and the logits of a run that computed the same prefix bit for bit
// (which a state tensor left out of ModelState::tensors() would change); files of another model, cut
// short or damaged are refused with a warning, a directory that cannot be written is one; the RAM budget
// is kept, least recently used first out.
#include "runtime/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/fixture.h"
#include "common/test_util.h"
#include "runtime/conversation.h"
#include "runtime/engine.h"

namespace coli {
namespace {

constexpr int kGreedyTokens = 8;
constexpr int64_t kTailTokens = 3;  // the prompts' tokens after the shared prefix
constexpr uint64_t kRoomyBudget = uint64_t{1} << 30;
// The fixtures' prompts are short: entries that add this many tokens to the one they extend are kept.
constexpr int64_t kFewTokens = 2;

EngineOptions options_for(const std::filesystem::path& dir) {
    EngineOptions o;
    o.backend = "cpu";
    o.model_dir = dir;
    o.hot_set = "none";  // never write into the source tree
    return o;
}

PrefixCacheOptions cache_options(const std::filesystem::path& dir = {}, uint64_t budget = kRoomyBudget) {
    return {.ram_bytes = budget, .dir = dir, .min_tokens = kFewTokens};
}

std::vector<int32_t> greedy(Session& s, std::span<const int32_t> prompt,
                            const std::function<void()>& on_prefilled = {}) {
    Sampler sampler(SamplerOptions{});
    return s.generate(prompt, kGreedyTokens, sampler, {}, {}, on_prefilled);
}

// Two prompts of a fixture that share exactly its first T - kTailTokens tokens: the fixture's own prompt,
// and the same prefix followed by other tokens.
struct Prompts {
    std::vector<int32_t> first, second;
    int64_t shared = 0;
};

Prompts prompts_of(const test::Fixture& fx) {
    Prompts p;
    p.first = fx.input_ids;
    p.shared = static_cast<int64_t>(fx.input_ids.size()) - kTailTokens;
    p.second.assign(fx.input_ids.begin(), fx.input_ids.begin() + p.shared);
    for (int64_t i = p.shared; i < static_cast<int64_t>(fx.input_ids.size()); ++i)
        p.second.push_back(static_cast<int32_t>((fx.input_ids[size_t(i)] + 1) % fx.vocab));
    return p;
}

class FamilyPrefixCache : public testing::TestWithParam<const char*> {};

TEST_P(FamilyPrefixCache, RestoredPrefixGivesTheTokensOfACleanRun) {
    const test::Fixture fx = test::fixture_load(GetParam());
    const Prompts p = prompts_of(fx);
    Engine engine(options_for(fx.dir));
    test::TempDir dir("prefix-cache");

    Session clean(engine.model());
    const std::vector<int32_t> expected = greedy(clean, p.second);
    // The same prefix computed, not restored: the logits the restored state must give, bit for bit.
    Session split(engine.model());
    split.forward(std::span(p.second).first(size_t(p.shared)), false);
    const std::vector<float> expected_logits =
        split.forward(std::span(p.second).subspan(size_t(p.shared)), false);

    const uint64_t fingerprint = prefix_cache_fingerprint(engine, clean.state());
    {
        PrefixCache cache(cache_options(dir.path()), fingerprint);
        EXPECT_EQ(cache.next_keep(p.first, 0, p.shared), p.shared);
        Session first(engine.model());
        // The first prompt keeps its state at the shared prefix (the boundary) and at its end.
        const PrefixFill fill = cache.prefill(first, p.first, 0, p.shared);
        EXPECT_EQ(fill.held, p.shared);
        EXPECT_EQ(fill.reused, 0);
        const int64_t held = fill.held;
        greedy(first, std::span(p.first).subspan(size_t(held)), [&] { cache.insert(first, p.first); });
        EXPECT_EQ(cache.stats().entries, 2u);

        Session second(engine.model());  // a state that never saw the prefix
        const PrefixFill fill2 = cache.prefill(second, p.second, 0, 0);
        EXPECT_EQ(fill2.reused, p.shared);
        EXPECT_EQ(fill2.held, p.shared);
        EXPECT_EQ(cache.stats().hits, 1u);
        EXPECT_EQ(cache.stats().tokens_reused, uint64_t(p.shared));
        EXPECT_EQ(greedy(second, std::span(p.second).subspan(size_t(p.shared))), expected);

        // Restored into a fresh state, and into one that held another prompt (rows past the prefix stale):
        // the restore writes into the tensors there are.
        Session fresh(engine.model());
        for (Session* s : {&fresh, &first}) {
            s->reset();
            EXPECT_EQ(cache.prefill(*s, p.second, 0, 0).held, p.shared);
            const std::vector<float> got = s->forward(std::span(p.second).subspan(size_t(p.shared)), false);
            ASSERT_EQ(got.size(), expected_logits.size());
            EXPECT_EQ(std::memcmp(got.data(), expected_logits.data(), got.size() * sizeof(float)), 0)
                << "the restored state differs from the computed one";
        }
        // The same on a model state of its own, as the server's batch slots use the cache.
        const std::unique_ptr<ModelState> slot = engine.model().state_new();
        EXPECT_EQ(cache.restore(engine.ops(), *slot, p.second, 0), p.shared);
        const std::vector<float> got = engine.ops().read(
            engine.model().forward(std::span(p.second).subspan(size_t(p.shared)), *slot, false));
        ASSERT_EQ(got.size(), expected_logits.size());
        EXPECT_EQ(std::memcmp(got.data(), expected_logits.data(), got.size() * sizeof(float)), 0);
        EXPECT_EQ(cache.next_keep(p.second, 0, 0), 0) << "the shared prefix is kept already";
    }
    // A new cache over the same directory, as after a restart, reads both entries back.
    PrefixCache restarted(cache_options(dir.path()), fingerprint);
    EXPECT_EQ(restarted.stats().files_loaded, 2u);
    EXPECT_EQ(restarted.stats().files_refused, 0u);
    Session after(engine.model());
    const PrefixFill fill = restarted.prefill(after, p.second, 0, 0);
    EXPECT_EQ(fill.reused, p.shared);
    EXPECT_EQ(fill.held, p.shared);
    EXPECT_EQ(greedy(after, std::span(p.second).subspan(size_t(p.shared))), expected);
}

// olmoe (KV), deepseek_v3 (MLA latents), deepseek_v32 and glm_moe_dsa (DSA indexer keys), kimi_linear and
// kimi_k3 (KDA recurrent states and convolutions), deepseek_v4 (ring, compressed entries and the
// compressors' partial windows: the prefix of 37 tokens ends inside windows of 4, 8 and the ring of 8).
INSTANTIATE_TEST_SUITE_P(Fixtures, FamilyPrefixCache,
                         testing::Values("olmoe_base", "deepseek_v3", "deepseek_v32", "glm_moe_dsa",
                                         "kimi_linear", "kimi_k3", "deepseek_v4"));

// One entry file of the olmoe_base fixture's model, its fingerprint, and the fixture's prompts.
struct WrittenEntry {
    std::string bytes;
    uint64_t fingerprint = 0;
    Prompts prompts;
};

WrittenEntry entry_written(Engine& engine, const test::Fixture& fx) {
    test::TempDir dir("prefix-entry");
    WrittenEntry w;
    w.prompts = prompts_of(fx);
    Session s(engine.model());
    w.fingerprint = prefix_cache_fingerprint(engine, s.state());
    PrefixCache cache(cache_options(dir.path()), w.fingerprint);
    s.forward(std::span(w.prompts.first).first(size_t(w.prompts.shared)), false);
    cache.insert(s, std::span(w.prompts.first).first(size_t(w.prompts.shared)));
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(dir.path())) files.push_back(f.path());
    EXPECT_EQ(files.size(), 1u);
    if (!files.empty()) w.bytes = test::read_bytes(files.front());
    return w;
}

// The cache over a directory holding one file of `bytes`: refused with one warning naming `reason`, and
// the prompt is then computed, not restored.
void expect_refused(Engine& engine, const WrittenEntry& w, const std::string& bytes,
                    const std::string& reason) {
    test::TempDir dir("prefix-bad");
    test::write_bytes(dir / "entry.prefix", bytes);
    testing::internal::CaptureStderr();
    PrefixCache cache(cache_options(dir.path()), w.fingerprint);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(cache.stats().files_loaded, 0u);
    EXPECT_EQ(cache.stats().files_refused, 1u);
    EXPECT_NE(err.find("warning: ignoring the prefix-cache file"), std::string::npos) << err;
    EXPECT_NE(err.find(reason), std::string::npos) << err;
    EXPECT_EQ(err.find("warning:"), err.rfind("warning:")) << "one warning:\n" << err;
    EXPECT_TRUE(std::filesystem::exists(dir / "entry.prefix")) << "a refused file is left as it is";
    Session s(engine.model());
    EXPECT_EQ(cache.prefill(s, w.prompts.second, 0, 0).held, 0);
}

TEST(PrefixCacheFiles, DamagedOrForeignFilesAreRefusedWithAWarning) {
    const test::Fixture fx = test::fixture_load("olmoe_base");
    Engine engine(options_for(fx.dir));
    const WrittenEntry w = entry_written(engine, fx);
    ASSERT_GT(w.bytes.size(), 64u);
    {  // the file as written is read back: the cases below fail for their own reason only
        test::TempDir dir("prefix-good");
        test::write_bytes(dir / "entry.prefix", w.bytes);
        PrefixCache cache(cache_options(dir.path()), w.fingerprint);
        EXPECT_EQ(cache.stats().files_loaded, 1u);
    }
    expect_refused(engine, w, w.bytes.substr(0, w.bytes.size() / 2), "bytes long");
    expect_refused(engine, w, w.bytes.substr(0, 20), "cut short in its header");
    std::string flipped = w.bytes;
    flipped[flipped.size() / 2] ^= 0x40;  // one bit of the state
    expect_refused(engine, w, flipped, "damaged (checksum mismatch)");
    expect_refused(engine, w, "{\"format\": \"colibri-hot-set\"}", "not a colibri prefix-cache file");

    // A file of another model (the deepseek_v3 fixture's), as a shared --cache-dir would hold.
    const test::Fixture other_fx = test::fixture_load("deepseek_v3");
    Engine other(options_for(other_fx.dir));
    const WrittenEntry foreign = entry_written(other, other_fx);
    expect_refused(engine, w, foreign.bytes, "written for another model");

    // The same model on another backend or with --dense-bits has another fingerprint.
    EngineOptions quantized = options_for(fx.dir);
    quantized.dense_bits = 8;
    Engine engine8(quantized);
    Session s8(engine8.model());
    EXPECT_NE(prefix_cache_fingerprint(engine8, s8.state()), w.fingerprint);
}

TEST(PrefixCacheFiles, AnUnwritableDirectoryIsOneWarningAndEntriesStayInRam) {
    const test::Fixture fx = test::fixture_load("olmoe_base");
    Engine engine(options_for(fx.dir));
    test::TempDir dir("prefix-unwritable");
    test::write_bytes(dir / "file", "a file where the directory should be");
    Session probe(engine.model());
    PrefixCache cache(cache_options(dir / "file"), prefix_cache_fingerprint(engine, probe.state()));
    const Prompts p = prompts_of(fx);
    testing::internal::CaptureStderr();
    for (const std::vector<int32_t>* ids : {&p.first, &p.second}) {
        Session s(engine.model());
        s.forward(*ids, false);
        cache.insert(s, *ids);
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning: prefix cache: cannot write"), std::string::npos) << err;
    EXPECT_EQ(err.find("warning:"), err.rfind("warning:")) << "one warning:\n" << err;
    EXPECT_EQ(cache.stats().entries, 2u);
}

TEST(PrefixCacheBudget, LeastRecentlyUsedEntriesGoFirstAndTheirFilesWithThem) {
    const test::Fixture fx = test::fixture_load("olmoe_base");
    Engine engine(options_for(fx.dir));
    test::TempDir dir("prefix-lru");
    Session probe(engine.model());
    const uint64_t fingerprint = prefix_cache_fingerprint(engine, probe.state());
    // Three prompts of the same length that share no first token: each entry takes the same bytes.
    const int64_t n = static_cast<int64_t>(fx.input_ids.size());
    std::vector<std::vector<int32_t>> prompts;
    for (int32_t k = 0; k < 3; ++k) {
        std::vector<int32_t> ids = fx.input_ids;
        ids[0] = static_cast<int32_t>((ids[0] + 1 + k) % fx.vocab);
        prompts.push_back(ids);
    }
    const auto entry_bytes = [&] {
        Session s(engine.model());
        s.forward(prompts[0], false);
        return s.snapshot().bytes() + uint64_t(n) * sizeof(int32_t);
    }();
    PrefixCache cache(cache_options(dir.path(), 2 * entry_bytes + entry_bytes / 2), fingerprint);
    const auto keep = [&](const std::vector<int32_t>& ids) {
        Session s(engine.model());
        s.forward(ids, false);
        cache.insert(s, ids);
    };
    const auto restored = [&](const std::vector<int32_t>& ids) {
        std::vector<int32_t> longer = ids;
        longer.push_back(ids[1]);
        Session s(engine.model());
        return cache.prefill(s, longer, 0, 0).reused;
    };
    keep(prompts[0]);
    keep(prompts[1]);
    EXPECT_EQ(cache.stats().bytes_held, 2 * entry_bytes);
    EXPECT_EQ(restored(prompts[0]), n);  // prompts[0] is now the most recently used
    keep(prompts[2]);                    // evicts prompts[1], the least recently used
    EXPECT_EQ(cache.stats().evictions, 1u);
    EXPECT_EQ(cache.stats().entries, 2u);
    EXPECT_LE(cache.stats().bytes_held, 2 * entry_bytes + entry_bytes / 2);
    EXPECT_EQ(restored(prompts[1]), 0);
    EXPECT_EQ(restored(prompts[0]), n);
    EXPECT_EQ(restored(prompts[2]), n);
    size_t files = 0;
    for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir.path())) ++files;
    EXPECT_EQ(files, 2u) << "the evicted entry's file is deleted";

    // A cache too small for any entry keeps none.
    PrefixCache tiny(cache_options({}, entry_bytes / 2), fingerprint);
    Session s(engine.model());
    s.forward(prompts[0], false);
    tiny.insert(s, prompts[0]);
    EXPECT_EQ(tiny.stats().entries, 0u);
}

// Through Conversation, as `coli serve` uses it, on the demo model: chats that share a system message
// restore it after the first, and answer as a fresh conversation does.
TEST(PrefixCacheConversation, SharedSystemMessageIsComputedOnce) {
    Engine engine(options_for(std::string(COLI_SOURCE_DIR) + "/models/demo"));
    Conversation cached(engine.model(), engine.checkpoint(), true);
    PrefixCacheOptions opts;  // the default fewest tokens
    opts.ram_bytes = kRoomyBudget;
    cached.prefix_cache_open(opts, engine);
    const std::string system =
        "You answer in the words of the King James Bible, briefly, and you never speak of anything but what "
        "is written in the books of Moses, the prophets and the gospels, as they were read in the year 1611.";
    const auto chat = [&](Conversation& c, const std::string& question) {
        const std::vector<text::ChatMessage> messages = {{"system", system}, {"user", question}};
        const std::vector<int32_t> ids = c.text().chat_ids(messages);
        const int64_t boundary = c.text().chat_system_tokens(messages, ids);
        EXPECT_GE(boundary, kPrefixCacheMinTokens);
        Sampler sampler(SamplerOptions{});
        return c.generate(ids, true, {kGreedyTokens, {}, true, boundary}, sampler, {});
    };
    const GenerateResult a = chat(cached, "Who created the heaven?");
    EXPECT_EQ(a.cached_tokens, 0);
    const GenerateResult b = chat(cached, "And what of the waters?");
    EXPECT_GE(b.cached_tokens, kPrefixCacheMinTokens);
    EXPECT_EQ(cached.prefix_cache()->stats().hits, 1u);
    Conversation fresh(engine.model(), engine.checkpoint(), true);
    const GenerateResult b_fresh = chat(fresh, "And what of the waters?");
    EXPECT_EQ(b.text, b_fresh.text);
}

}  // namespace
}  // namespace coli
