#include "io/checkpoint_json.h"

#include <gtest/gtest.h>

#include "io/json.h"
#include "test_util.h"

namespace coli {
namespace {

TEST(JsonParse, RejectsDuplicateKeysAtAnyDepth) {
    EXPECT_COLI_ERROR(json_parse(R"({"a": 1, "a": 2})", "x.json"), "x.json: bad JSON: duplicate key \"a\"");
    EXPECT_COLI_ERROR(json_parse(R"({"a": [{"b": 1, "c": {"d": 0, "d": 0}}]})", "x.json"),
                      "duplicate key \"d\"");
    // The same key in different objects is fine.
    EXPECT_EQ(json_parse(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 3}]})", "x.json")["k"][0]["k"], 3);
}

TEST(JsonParse, ErrorsAreOneShortLine) {
    std::string long_token = "\"" + std::string(5000, 'x');  // an unterminated string of 5000 chars
    std::string msg = test::error_of([&] { json_parse(long_token, "x.json"); });
    EXPECT_LT(msg.size(), 400u) << msg;
    EXPECT_COLI_ERROR(json_parse("{\n\n", "x.json"), "x.json: bad JSON: parse error at line 3");
}

TEST(Quote, EscapesAndShortens) {
    EXPECT_EQ(quote("a\nb"), "\"a\\nb\"");
    EXPECT_EQ(quote("\xff"), "\"\xEF\xBF\xBD\"");  // invalid UTF-8 shown as U+FFFD
    EXPECT_LT(quote(std::string(1000, 'a')).size(), 300u);
}

TEST(CheckpointIndex, Parses) {
    auto m = checkpoint_index_parse(
        R"({"metadata": {"total_size": 1}, "weight_map": {"b": "s2", "a": "s1"}})", "i");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m.at("a"), "s1");
    EXPECT_EQ(m.at("b"), "s2");
}

TEST(CheckpointIndex, RejectsPathsOutsideTheDirectory) {
    for (const char* shard : {"", ".", "..", "../x", "a/b", "/etc/passwd", "a\\\\b", "x..y", "a\\u0000b"}) {
        std::string text = std::string(R"({"weight_map": {"t": ")") + shard + "\"}}";
        EXPECT_COLI_ERROR(checkpoint_index_parse(text, "i"), "is not a plain file name");
    }
    EXPECT_TRUE(is_plain_file_name("model-00001-of-00002.safetensors"));
}

TEST(CheckpointIndex, RejectsMalformed) {
    EXPECT_COLI_ERROR(checkpoint_index_parse("[]", "i"), "i: expected a JSON object, got array");
    EXPECT_COLI_ERROR(checkpoint_index_parse("{}", "i"), "i: no \"weight_map\"");
    EXPECT_COLI_ERROR(checkpoint_index_parse(R"({"weight_map": {}})", "i"), "\"weight_map\" is empty");
    EXPECT_COLI_ERROR(checkpoint_index_parse(R"({"weight_map": {"": "s"}})", "i"), "empty tensor name");
    EXPECT_COLI_ERROR(checkpoint_index_parse(R"({"weight_map": {"t": null}})", "i"), "shard is null");
}

TEST(CheckpointConfig, MustBeAnObject) {
    EXPECT_EQ(checkpoint_config_parse(R"({"a": 1})", "c")["a"], 1);
    EXPECT_COLI_ERROR(checkpoint_config_parse("3", "c"), "c: expected a JSON object, got number");
    EXPECT_COLI_ERROR(checkpoint_config_parse("", "c"), "c: bad JSON");
}

}  // namespace
}  // namespace coli
