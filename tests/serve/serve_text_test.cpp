// `coli serve`'s text endpoints in llama.cpp's shapes, from an HTTP client: POST /tokenize (ids, pieces,
// add_special), /detokenize and /apply-template give what `coli tokenize` gives for the same model (whose
// ids and renders tests/cli/tokenize_cli_test.cpp checks against the references), and bad input gets a 400
// in OpenAI's error shape.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "serve_process.h"

namespace coli::test {
namespace {

using nlohmann::json;

constexpr const char* kJsonType = "application/json";

// The answer's JSON body, after checking its status.
json body_of(const httplib::Result& r, int status = 200) {
    EXPECT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
    if (!r) return {};
    EXPECT_EQ(r->status, status) << r->body;
    return json::parse(r->body, nullptr, false);
}

void bad_request_expect(const httplib::Result& r, const std::string& code = {}) {
    const json body = body_of(r, 400);
    ASSERT_TRUE(body.is_object() && body.contains("error") && body["error"].is_object()) << r->body;
    EXPECT_TRUE(body["error"]["message"].is_string()) << r->body;
    EXPECT_EQ(body["error"]["type"], "invalid_request_error") << r->body;
    if (!code.empty()) {
        EXPECT_EQ(body["error"]["code"], code) << r->body;
    }
}

// `coli tokenize --model models/demo ARGS` and its stdout.
std::string cli_tokenize(const std::string& args) {
    const CommandResult r =
        command_run(std::string(COLI_BINARY) + " tokenize --model '" + kDemoModel.string() + "' " + args);
    EXPECT_EQ(r.exit_code, 0) << args;
    return r.output;
}

std::vector<int32_t> cli_ids(const std::string& text, bool special) {
    const std::string out = cli_tokenize((special ? "--special " : "") + std::string("-- '") + text + "'");
    std::vector<int32_t> ids;
    std::istringstream in(out);
    for (std::string item; std::getline(in, item, ',');) ids.push_back(std::stoi(item));
    return ids;
}

TEST(ServeText, TokenizeDetokenizeApplyTemplate) {
    ServeProcess server;
    auto c = server.client();
    const std::string text = "In the beginning God created the heaven and the earth.";

    const json ids = body_of(c->Post("/tokenize", json{{"content", text}}.dump(), kJsonType));
    ASSERT_TRUE(ids.contains("tokens")) << ids.dump();
    EXPECT_EQ(ids["tokens"], json(cli_ids(text, false)));
    const json special =
        body_of(c->Post("/tokenize", json{{"content", text}, {"add_special", true}}.dump(), kJsonType));
    EXPECT_EQ(special["tokens"], json(cli_ids(text, true)));

    const json back = body_of(c->Post("/detokenize", json{{"tokens", ids["tokens"]}}.dump(), kJsonType));
    EXPECT_EQ(back, (json{{"content", text}}));

    // Pieces: a string where the bytes are whole UTF-8 characters, else the list of byte values; together
    // they are the text's bytes.
    const std::string mixed = "Let there be light: 媽 🤗 é";
    const json pieces =
        body_of(c->Post("/tokenize", json{{"content", mixed}, {"with_pieces", true}}.dump(), kJsonType));
    const json plain = body_of(c->Post("/tokenize", json{{"content", mixed}}.dump(), kJsonType));
    ASSERT_EQ(pieces["tokens"].size(), plain["tokens"].size());
    std::string bytes;
    bool byte_lists = false;
    for (size_t i = 0; i < pieces["tokens"].size(); ++i) {
        const json& t = pieces["tokens"][i];
        EXPECT_EQ(t["id"], plain["tokens"][i]);
        if (t["piece"].is_string()) {
            bytes += t["piece"].get<std::string>();
        } else {
            ASSERT_TRUE(t["piece"].is_array()) << t.dump();
            byte_lists = true;
            for (const json& b : t["piece"]) bytes += static_cast<char>(b.get<int>());
        }
    }
    EXPECT_EQ(bytes, mixed);
    EXPECT_TRUE(byte_lists) << "the demo tokenizer splits these characters into bytes: " << pieces.dump();

    const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                           {{"role", "user"}, {"content", "Who created the heaven?"}}};
    const json prompt = body_of(c->Post("/apply-template", json{{"messages", messages}}.dump(), kJsonType));
    TempDir scratch("serve-text");
    write_bytes(scratch / "chat.json", messages.dump());
    const std::string cli_prompt = cli_tokenize("--chat '" + (scratch / "chat.json").string() + "'");
    EXPECT_EQ(prompt, (json{{"prompt", cli_prompt}}));
}

TEST(ServeText, BadInputGets400) {
    ServeProcess server;
    auto c = server.client();
    bad_request_expect(c->Post("/tokenize", "{\"content\": ", kJsonType), "invalid_json");
    bad_request_expect(c->Post("/tokenize", "[\"text\"]", kJsonType));
    bad_request_expect(c->Post("/tokenize", R"({"text": "wrong field"})", kJsonType));
    bad_request_expect(c->Post("/tokenize", R"({"content": 5})", kJsonType));
    bad_request_expect(c->Post("/tokenize", R"({"content": "x", "add_special": "yes"})", kJsonType));
    bad_request_expect(c->Post("/tokenize", R"({"content": "x", "with_pieces": 1})", kJsonType));
    bad_request_expect(c->Post("/detokenize", R"({"tokens": "1,2"})", kJsonType));
    bad_request_expect(c->Post("/detokenize", R"({})", kJsonType));
    for (const char* bad : {"-1", "1000000000", "2.5", "\"7\"", "99999999999999999999"})
        bad_request_expect(c->Post("/detokenize", std::string(R"({"tokens": [1, )") + bad + "]}", kJsonType));
    bad_request_expect(c->Post("/apply-template", R"({"messages": []})", kJsonType));
    bad_request_expect(
        c->Post("/apply-template", R"({"messages": [{"role": "robot", "content": "x"}]})", kJsonType));
    bad_request_expect(c->Post("/apply-template", R"({"prompt": "not messages"})", kJsonType));
    // Still serving.
    const json ok = body_of(c->Post("/detokenize", R"({"tokens": []})", kJsonType));
    EXPECT_EQ(ok, (json{{"content", ""}}));
}

}  // namespace
}  // namespace coli::test
