// `coli serve` against clients nobody here wrote: the official OpenAI and Anthropic SDKs from npm
// (tests/serve/clients, installed by `npm ci`), and the status page rendered by headless Chromium.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>
#include <string>

#include "serve_process.h"

namespace coli::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kClientsDir = fs::path(COLI_SOURCE_DIR) / "tests/serve/clients";
// Chromium's virtual time: long enough for the page to load and poll /api/status a few times.
constexpr int kVirtualTimeMs = 5000;

void completion_send(httplib::Client& c, int max_tokens) {
    const auto r = c.Post(
        "/v1/completions",
        json{{"model", kDemoId}, {"prompt", "And God said"}, {"max_tokens", max_tokens}, {"temperature", 0}}
            .dump(),
        "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
}

// The text of the element with this id in a dumped DOM ("" when absent).
std::string element_text(const std::string& dom, const std::string& id) {
    std::smatch m;
    const std::regex re("id=\"" + id + "\"[^>]*>([^<]*)<");
    return std::regex_search(dom, m, re) ? m[1].str() : "";
}

std::string chromium_command() {
    const CommandResult which = command_run("command -v chromium");
    if (which.exit_code != 0) return "";
    return "chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
           "--hide-scrollbars --virtual-time-budget=" +
           std::to_string(kVirtualTimeMs);
}

TEST(ServeClients, OfficialOpenAIAndAnthropicSdks) {
    for (const char* pkg : {"openai", "@anthropic-ai/sdk"})
        ASSERT_TRUE(fs::exists(kClientsDir / "node_modules" / pkg))
            << "the npm package " << pkg << " is not installed: run `npm ci --prefix tests/serve/clients` "
            << "(scripts/test.sh does)";
    ServeProcess server;
    const CommandResult r = command_run("node " + (kClientsDir / "clients.mjs").string() + " " +
                                        server.base_url() + " " + kDemoId + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output << "\nserver:\n" << server.err();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"((\d+) passed, (\d+) failed)"))) << r.output;
    EXPECT_GE(std::stoi(m[1].str()), 15) << r.output;
    EXPECT_EQ(m[2].str(), "0") << r.output;
}

TEST(ServeClients, StatusPageShowsLiveNumbersInChromium) {
    const std::string chromium = chromium_command();
    ASSERT_FALSE(chromium.empty())
        << "chromium is not installed: apt-get install chromium (scripts/test.sh does)";
    ServeProcess server;
    auto c = server.client();
    TempDir profile("chromium");
    const std::string flags = " --user-data-dir=" + profile.path().string() + " ";
    const auto dom_of_page = [&] {
        const CommandResult r =
            command_run(chromium + flags + "--dump-dom " + server.base_url() + "/ 2>/dev/null");
        EXPECT_EQ(r.exit_code, 0);
        return r.output;
    };
    const auto generated_now = [&] {
        const auto s = c->Get("/api/status");
        EXPECT_TRUE(s && s->status == 200);
        return json::parse(s->body)["tokens"]["generated"].get<int64_t>();
    };

    completion_send(*c, 8);
    const std::string before = dom_of_page();
    // The script filled the page from /api/status: the same numbers the server reports now.
    EXPECT_EQ(element_text(before, "model-id"), kDemoId) << before;
    EXPECT_EQ(element_text(before, "backend"), "cpu") << before;
    EXPECT_EQ(element_text(before, "generated"), std::to_string(generated_now())) << before;
    EXPECT_GE(std::stoi("0" + element_text(before, "updates")), 1) << before;
    EXPECT_TRUE(std::regex_match(element_text(before, "tok-s"), std::regex(R"(\d+\.\d)"))) << before;
    EXPECT_GT(std::stod("0" + element_text(before, "tok-s")), 0) << before;
    EXPECT_TRUE(std::regex_match(element_text(before, "hit-rate"), std::regex(R"(\d+\.\d%)"))) << before;
    EXPECT_EQ(element_text(before, "fallbacks"), "0") << before;
    EXPECT_NE(element_text(before, "state").find("live"), std::string::npos) << before;

    // More traffic: a fresh load shows the new totals.
    completion_send(*c, 16);
    completion_send(*c, 16);
    const std::string after = dom_of_page();
    EXPECT_EQ(element_text(after, "generated"), std::to_string(generated_now())) << after;
    EXPECT_GT(std::stoll("0" + element_text(after, "generated")),
              std::stoll("0" + element_text(before, "generated")));

    // The screenshot is kept as a test artifact.
    const fs::path artifacts = COLI_ARTIFACT_DIR;
    fs::create_directories(artifacts);
    const fs::path png = artifacts / "status.png";
    fs::remove(png);
    const CommandResult shot =
        command_run(chromium + flags + "--window-size=1280,900 --screenshot=" + png.string() + " " +
                    server.base_url() + "/ 2>&1");
    EXPECT_EQ(shot.exit_code, 0) << shot.output;
    const std::string bytes = read_bytes(png);
    ASSERT_GT(bytes.size(), 8u) << "no screenshot at " << png << ": " << shot.output;
    EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace coli::test
