// `coli serve --prefix-cache-gb --cache-dir` on the demo model: chats sharing a long system message get the
// answers of a server without the cache, /metrics counts the restored prefixes, and a restarted server
// reads the entries back from the directory (a foreign file there refused with a warning).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "serve/serve_process.h"

namespace coli::test {
namespace {

using json = nlohmann::json;

constexpr int kMaxTokens = 8;
constexpr const char* kSystem =
    "You are a scribe of the King James Bible. You answer every question in its words, briefly, and you "
    "never speak of anything but what is written in the books of Moses, the prophets and the gospels.";

// The greedy answer of a chat with the shared system message.
std::string answer(ServeProcess& server, const std::string& question) {
    const json body = {
        {"model", kDemoId},
        {"messages", {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", question}}}},
        {"max_tokens", kMaxTokens},
        {"temperature", 0}};
    const auto r = server.client()->Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["choices"][0]["message"]["content"].get<std::string>();
}

double metric(ServeProcess& server, const std::string& name) {
    const auto r = server.client()->Get("/metrics");
    EXPECT_TRUE(r);
    if (!r) return -1;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    ADD_FAILURE() << "no series " << name << " in /metrics";
    return -1;
}

TEST(ServePrefixCache, SharedSystemMessageIsRestoredAndKeptAcrossARestart) {
    const std::vector<std::string> questions = {
        "Who created the heaven?", "What was upon the face of the deep?", "And what of the waters?"};
    std::vector<std::string> expected;
    {
        ServeProcess plain;
        for (const std::string& q : questions) expected.push_back(answer(plain, q));
    }
    TempDir dir("serve-prefix");
    const std::vector<std::string> flags = {"--prefix-cache-gb", "1", "--cache-dir", dir.path().string()};
    {
        ServeProcess cached(flags);
        EXPECT_EQ(answer(cached, questions[0]), expected[0]);
        EXPECT_EQ(metric(cached, "coli_prefix_cache_hits_total"), 0);
        EXPECT_EQ(answer(cached, questions[1]), expected[1]);
        EXPECT_EQ(metric(cached, "coli_prefix_cache_hits_total"), 1);
        EXPECT_GT(metric(cached, "coli_prefix_cache_reused_tokens_total"), 0);
        EXPECT_GT(metric(cached, "coli_prefix_cache_restored_bytes_total"), 0);
        EXPECT_GT(metric(cached, "coli_prefix_cache_bytes"), 0);
    }
    write_bytes(dir / "foreign.prefix", "not a prefix-cache file");
    ServeProcess restarted(flags);
    EXPECT_NE(restarted.err().find("warning: ignoring the prefix-cache file"), std::string::npos)
        << restarted.err();
    EXPECT_EQ(answer(restarted, questions[2]), expected[2]);
    EXPECT_GT(metric(restarted, "coli_prefix_cache_files_loaded_total"), 0);
    EXPECT_EQ(metric(restarted, "coli_prefix_cache_files_refused_total"), 1);
    EXPECT_EQ(metric(restarted, "coli_prefix_cache_hits_total"), 1) << "the first request after the restart";
}

TEST(ServePrefixCache, CacheDirWithoutABudgetIsAnError) {
    const CommandResult r = command_run(std::string(COLI_BINARY) + " serve --model " + kDemoModel.string() +
                                        " --port 0 --cache-dir /tmp/unused 2>&1");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("coli: error: --cache-dir needs --prefix-cache-gb"), std::string::npos)
        << r.output;
}

}  // namespace
}  // namespace coli::test
