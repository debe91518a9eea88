// Finding a model's chat template and rendering a conversation the way transformers does.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"

namespace coli::text {
namespace {

namespace fs = std::filesystem;

// A fresh model directory under the test's temporary folder.
class ChatTemplateLoad : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ =
            fs::path(::testing::TempDir()) /
            ("chat_template_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
    void write_json(const std::string& name, const nlohmann::json& j) { write(name, j.dump()); }

    std::string error_of_load() {
        try {
            ChatTemplate::load(dir_);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }

    fs::path dir_;
};

constexpr const char* kSimpleTemplate =
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}";

TEST_F(ChatTemplateLoad, FromTokenizerConfigWithAddedTokenObjects) {
    write_json("tokenizer_config.json",
               {{"chat_template", kSimpleTemplate},
                {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"lstrip", false}}},
                {"eos_token", "</s>"},
                {"pad_token", nullptr}});
    ChatTemplate t = ChatTemplate::load(dir_);
    EXPECT_EQ(t.render({{"user", "hi"}}, true), "<s><user>hi<assistant>");
    EXPECT_EQ(t.render({{"system", "s"}, {"user", "u"}, {"assistant", "a"}}, false),
              "<s><system>s<user>u<assistant>a");
    EXPECT_EQ(t.special_tokens()["eos_token"], "</s>");
    EXPECT_FALSE(t.special_tokens().contains("pad_token"));  // null tokens are not passed, as in transformers
}

TEST_F(ChatTemplateLoad, NamedTemplatesUseDefault) {
    write_json(
        "tokenizer_config.json",
        {{"chat_template",
          {{{"name", "tool_use"}, {"template", "tools"}}, {{"name", "default"}, {"template", "plain"}}}}});
    EXPECT_EQ(ChatTemplate::load(dir_).render({}, false), "plain");
}

TEST_F(ChatTemplateLoad, NamedTemplatesWithoutDefaultAreAnError) {
    write_json("tokenizer_config.json", {{"chat_template", {{{"name", "tool_use"}, {"template", "tools"}}}}});
    std::string error = error_of_load();
    EXPECT_NE(error.find("tool_use"), std::string::npos) << error;
    EXPECT_NE(error.find("default"), std::string::npos) << error;
}

TEST_F(ChatTemplateLoad, ChatTemplateJinjaFileWins) {
    write_json("tokenizer_config.json", {{"chat_template", "from config"}, {"bos_token", "<s>"}});
    write("chat_template.jinja", "from file {{ bos_token }}\n");
    EXPECT_EQ(ChatTemplate::load(dir_).render({}, false), "from file <s>");
}

TEST_F(ChatTemplateLoad, ChatTemplateJsonIsTheLastResort) {
    write_json("chat_template.json", {{"chat_template", "processor template"}});
    EXPECT_EQ(ChatTemplate::load(dir_).render({}, false), "processor template");
}

TEST_F(ChatTemplateLoad, MissingTemplateSaysWhereItLooked) {
    write_json("tokenizer_config.json", {{"bos_token", "<s>"}});
    std::string error = error_of_load();
    EXPECT_NE(error.find("no chat template"), std::string::npos) << error;
    EXPECT_NE(error.find("chat_template.jinja"), std::string::npos) << error;
}

TEST_F(ChatTemplateLoad, SyntaxErrorNamesTheFileAndLine) {
    write("chat_template.jinja", "ok\n{% for m in messages %}\n{% include 'x' %}{% endfor %}");
    std::string error = error_of_load();
    EXPECT_NE(error.find("chat_template.jinja"), std::string::npos) << error;
    EXPECT_NE(error.find("line 3"), std::string::npos) << error;
    EXPECT_NE(error.find("include"), std::string::npos) << error;
}

TEST(ChatTemplateRender, VariablesAsTransformersPassesThem) {
    ChatTemplate t = ChatTemplate::from_source(
        "{{ tools is none }}|{{ documents is none }}|{{ enable_thinking is defined }}|{{ messages | length "
        "}}");
    EXPECT_EQ(t.render({{"user", "x"}}, false), "True|True|False|1");
    EXPECT_EQ(t.render({}, false, {{"enable_thinking", false}}), "True|True|True|0");
}

TEST(ChatTemplateRender, ExtraVariablesOverrideAndKeepKeyOrder) {
    ChatTemplate t = ChatTemplate::from_source("{{ tools | tojson }}", {{"bos_token", "<s>"}});
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    tools.push_back({{"z", 1}, {"a", "é"}});
    EXPECT_EQ(t.render({}, false, {{"tools", tools}}), R"([{"z": 1, "a": "é"}])");
}

TEST(ChatTemplateRender, MessagesAsJsonCarryToolCalls) {
    ChatTemplate t = ChatTemplate::from_source(
        "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.name }}"
        "{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}");
    auto messages = nlohmann::ordered_json::parse(
        R"([{"role": "assistant", "content": null,
             "tool_calls": [{"function": {"name": "f", "arguments": {"b": 2, "a": [1.5, true, null]}}}]}])");
    EXPECT_EQ(t.render_json(messages, false), R"(f{"b": 2, "a": [1.5, true, null]})");
}

TEST(ChatTemplateRender, RenderErrorsNameTheTemplate) {
    ChatTemplate t =
        ChatTemplate::from_source("{{ raise_exception('no system role') }}", {}, "my/template.jinja");
    try {
        t.render({{"system", "x"}}, false);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("my/template.jinja"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("no system role"), std::string::npos) << e.what();
    }
}

TEST(ChatTemplateRender, MessagesCannotBeOverriddenThroughExtra) {
    ChatTemplate t = ChatTemplate::from_source("x");
    EXPECT_THROW(t.render({}, false, {{"messages", nlohmann::ordered_json::array()}}), Error);
}

}  // namespace
}  // namespace coli::text
