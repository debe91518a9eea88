// Each family's reference op calls (family_op_calls: what `coli backends` asks every backend about; the
// forward recorded at the family's real size on a checkpoint of shapes only) against the ops its forward
// calls on real checkpoints. Every fixture runs a prefill of several tokens and a decode of one on the CPU
// with every op call recorded (Ops::record_to), with an unlimited expert cache and with one slot per layer
// (where the next layer's experts are prefetched). A call the reference does not have fails, and so does a
// reference op that no fixture of the family calls. moe_experts is told apart by its activation.
// deepseek_v4's forward is also recorded on the checkpoint `coli synth --arch deepseek_v4` writes at test
// time (deepseek_v4_synth.h), with a prefill that closes CSA and HCA windows of the release's sizes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/drafting_synth.h"
#include "common/fixture.h"
#include "common/test_util.h"
#include "deepseek_v4_synth.h"
#include "runtime/engine.h"
#include "runtime/op_record.h"
#include "runtime/session.h"

namespace coli {
namespace {

constexpr int kExpertCaches[] = {0, 1};  // unlimited; one slot per layer
constexpr size_t kPrefillTokens = 6;     // a prefill of several tokens; then one token decodes

// An op as the lists declare it: its kind, and moe_experts' activation.
using OpKey = std::pair<OpKind, GluKind>;

OpKey key_of(OpKind op, GluKind glu) {
    return {op, op == OpKind::moe_experts ? glu : GluKind::silu};
}

std::string key_name(const OpKey& k) {
    if (k.first != OpKind::moe_experts) return std::string(op_name(k.first));
    return fmt::format("{} ({})", op_name(k.first), glu_name(k.second));
}

// A checkpoint whose forward is recorded: its prompt and how much of it the prefill takes.
struct Recorded {
    std::string name;
    std::filesystem::path dir;
    std::vector<int32_t> input_ids;
    size_t prefill = kPrefillTokens;
    bool drafts = false;  // loaded with its MTP layer, which drafts after the prefill and after the decode
};

Recorded from_fixture(const std::string& fixture) {
    test::Fixture fx = test::fixture_load(fixture);
    return {fixture, fx.dir, std::move(fx.input_ids)};
}

// The ops one checkpoint's forward calls, and its family.
std::pair<std::string, std::set<OpKey>> forward_ops(const Recorded& r, int expert_cache) {
    EngineOptions o;
    o.model_dir = r.dir;
    o.backend = "cpu";
    o.expert_cache = expert_cache;
    o.hot_set = "none";  // never write into the source tree
    o.speculate = r.drafts;
    Engine engine(o);
    std::vector<OpDesc> calls;
    engine.ops().record_to(&calls);
    Session session(engine.model());
    const std::span<const int32_t> ids(r.input_ids);
    session.forward(ids.first(r.prefill), true);
    if (r.drafts) engine.model().draft(ids.subspan(1, r.prefill), session.state());
    session.forward(ids.subspan(r.prefill, 1), false);
    if (r.drafts) engine.model().draft(ids.subspan(r.prefill + 1, 1), session.state());
    // A step of the server's continuous batching: two sequences' tokens in one pass.
    const std::unique_ptr<ModelState> a = engine.model().state_new(), b = engine.model().state_new();
    const SequenceStep batch[] = {{ids.first(1), a.get()}, {ids.first(2), b.get()}};
    engine.model().forward_batch(batch);
    engine.ops().record_to(nullptr);
    std::set<OpKey> ops;
    for (const OpDesc& d : calls) ops.insert(key_of(d.op, d.glu));
    return {engine.model().summary().family, ops};
}

TEST(OpLists, RecordWhatTheForwardCalls) {
    std::vector<Recorded> runs;
    for (const char* fixture : test::kOracleFixtures) runs.push_back(from_fixture(fixture));
    runs.push_back(from_fixture("models/demo"));     // the bundled demo model (olmoe, bf16)
    Recorded mtp = from_fixture("deepseek_v3_mtp");  // transformers' MTP layer, drafting
    mtp.name += " drafting";
    mtp.drafts = true;
    runs.push_back(std::move(mtp));
    // The families that draft, with their MTP layer drafting; their vocabularies hold the deepseek_v3
    // fixture's prompt.
    const test::TempDir drafting("oplist-drafting");
    for (const char* arch : test::kDraftingArchs)
        runs.push_back({fmt::format("synthesized {} drafting", arch),
                        test::drafting_synth(drafting.path(), arch).out,
                        from_fixture("deepseek_v3").input_ids, kPrefillTokens, true});
    if (std::filesystem::exists(test::fixtures_dir() / "deepseek_v4")) {
        runs.push_back(from_fixture("deepseek_v4"));
        runs.push_back(from_fixture("deepseek_v4_orig"));
    } else {
        const test::SynthModel& m = test::deepseek_v4_synth();
        runs.push_back({"synthesized deepseek_v4", m.dir, m.input_ids, test::kV4SynthHca + 1});
    }
    std::map<std::string, std::set<OpKey>> reference;  // family -> the ops `coli backends` asks about
    std::map<std::string, std::string> source;         // family -> how they were recorded
    for (const std::string& family : model_families()) {
        const FamilyOpCalls f = family_op_calls(family);
        ASSERT_FALSE(f.calls.empty()) << family;
        for (const OpCall& c : f.calls) reference[family].insert(key_of(c.desc.op, c.desc.glu));
        source[family] = f.source;
    }
    std::map<std::string, std::set<OpKey>> called;  // family -> ops any of its checkpoints called
    for (const Recorded& r : runs)
        for (int cache : kExpertCaches) {
            const std::string& fixture = r.name;
            const auto [family, ops] = forward_ops(r, cache);
            ASSERT_TRUE(reference.contains(family)) << fixture << ": family " << family;
            for (const OpKey& k : ops)
                EXPECT_TRUE(reference[family].contains(k))
                    << fixture << " (expert cache " << cache << "): the " << family << " forward calls "
                    << key_name(k) << ", which its reference calls do not have (" << source[family] << ")";
            called[family].insert(ops.begin(), ops.end());
        }
    for (const std::string& family : model_families()) {
        ASSERT_TRUE(called.contains(family)) << family << " has no fixture here to record its forward from";
        for (const OpKey& k : reference[family])
            EXPECT_TRUE(called[family].contains(k))
                << family << "'s reference calls " << key_name(k) << " (" << source[family]
                << "), which no fixture's forward calls";
    }
}

}  // namespace
}  // namespace coli
