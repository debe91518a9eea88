// A server's memory under concurrent requests with long contexts (docs/reliability.md): what it holds at
// its peak (VmHWM) beyond what it held idle, the resident weights loaded, stays within the rest of the
// memory plan that `coli info` prints for the same flags (every request's cache, the expert budget) plus a
// stated slack for one pass's activations; and it is above what a plan of two requests' caches would allow,
// so that the bound rests on counting the cache of every request generating at once. The process's own
// footprint (binary, libraries, threads) is the idle server's, measured, not a constant.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <future>
#include <regex>
#include <string>
#include <vector>

#include "byte_tokenizer.h"
#include "common/checkpoint_bytes.h"
#include "common/process.h"
#include "serve_process.h"

namespace coli::test {
namespace {

using nlohmann::json;

// OLMoE at --scale 4 with 3 layers (hidden 512, 4 kv heads of 128, 64 experts top-8): 32 MB of dense
// weights, 151 MB of routed experts; a token of context costs 3 layers x (k, v) x 512 floats.
constexpr int kLayers = 3, kKvWidth = 512, kCtx = 2048;
constexpr uint64_t kSequenceBytes = uint64_t(kLayers) * 2 * kKvWidth * sizeof(float) * kCtx;  // 25.2 MB
constexpr int kRequests = 4;
constexpr int kPromptBytes = 1900;  // one token per byte: with the answer, 94% of the context
constexpr int kAnswerTokens = 32;
// What a pass of the batch holds beside the plan: its activations and MoE scratch, for 4 requests' prompt
// chunks of kChunk tokens (measured: the peak grows by ~16 MB from chunks of 8 tokens to 256; 2-4 MB at 32).
// What a miscounted plan would hide is a sequence's cache (25 MB) or more.
constexpr int kChunk = 32;
constexpr uint64_t kPassSlackBytes = 12'000'000;
TEST(ServeMemory, PeakRssUnderConcurrentLongRequestsStaysWithinThePlan) {
    TempDir dir("serve-memory");
    const std::filesystem::path model = dir / "olmoe";
    const ProcessResult synth = coli_run("synth --arch olmoe --scale 4 --layers 3 -o " + model.string());
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    byte_tokenizer_write(model);
    // A budget of about a quarter of the experts: the cache fills it.
    const std::vector<std::string> flags = {"--backend",  "cpu",
                                            "--ram-gb",   "0.04",
                                            "--ctx",      std::to_string(kCtx),
                                            "--parallel", std::to_string(kRequests)};
    std::string info_args = "info -m " + model.string();
    for (const std::string& f : flags) info_args += " " + f;
    const ProcessResult info = coli_run(info_args);
    ASSERT_EQ(info.exit_code, 0) << info.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(info.out, m, std::regex(R"(memory plan: .* at most \((\d+) bytes\))")))
        << info.out;
    const uint64_t plan = std::stoull(m[1].str());

    std::vector<std::string> server_flags = flags;
    server_flags.insert(server_flags.end(), {"--prefill-chunk", std::to_string(kChunk)});
    ServeProcess server(server_flags, model);
    const uint64_t idle = server.rss_bytes();  // the resident weights are loaded before it listens
    const uint64_t dense = checkpoint_bytes(model).dense;
    std::string prompt;
    for (int i = 0; i < kPromptBytes; ++i) prompt += (i % 7 == 6) ? ' ' : char('a' + (i * 31 + 7) % 26);
    std::vector<std::future<httplib::Result>> answers;
    for (int r = 0; r < kRequests; ++r) {
        const std::string body = json{
            {"model", "olmoe"},
            {"prompt", std::to_string(r) + prompt.substr(1)},
            {"max_tokens", kAnswerTokens},
            {"temperature", 0},
            {"ignore_eos", true}}.dump();
        answers.push_back(std::async(std::launch::async, [&server, body] {
            return server.client()->Post("/v1/completions", body, "application/json");
        }));
    }
    for (auto& a : answers) {
        const httplib::Result r = a.get();
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        ASSERT_EQ(r->status, 200) << r->body;
        EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], kPromptBytes) << r->body;
    }
    const uint64_t peak = server.peak_rss_bytes();
    ASSERT_GT(idle, dense) << "the server holds its resident weights before it listens";
    // The plan beyond the resident weights: the requests' caches and the expert budget.
    const uint64_t growth_planned = plan - dense;
    std::printf(
        "server RSS idle %.1f MB (weights %.1f MB), peak %.1f MB: grew %.1f MB against the plan's %.1f MB "
        "beyond the weights (+ %.0f MB for a pass)\n",
        idle / 1e6, dense / 1e6, peak / 1e6, (peak - idle) / 1e6, growth_planned / 1e6,
        kPassSlackBytes / 1e6);
    EXPECT_LE(peak - idle, growth_planned + kPassSlackBytes);
    EXPECT_GT(peak - idle, growth_planned - 2 * kSequenceBytes)
        << "the caches of more than two requests were held at once";
}

}  // namespace
}  // namespace coli::test
