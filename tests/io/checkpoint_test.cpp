#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "test_util.h"

namespace coli {
namespace {

using test::TempDir;
using test::write_bytes;

constexpr std::string_view kConfig = R"({"model_type": "olmoe", "hidden_size": 8})";

// A checkpoint with config.json and two shards: a, b in shard 1; c in shard 2.
class ShardedCheckpoint : public testing::Test {
protected:
    void SetUp() override {
        write_bytes(dir / "config.json", kConfig);
        safetensors_write(dir / "model-00001-of-00002.safetensors",
                          {{"a", DType::f32, {2, 2}, a.data()}, {"b", DType::u8, {4}, b.data()}});
        safetensors_write(dir / "model-00002-of-00002.safetensors", {{"c", DType::bf16, {3}, c.data()}});
        write_index(R"({"metadata": {"total_size": 26}, "weight_map": {)"
                    R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
                    R"("c": "model-00002-of-00002.safetensors"}})");
    }
    void write_index(std::string_view json) { write_bytes(dir / "model.safetensors.index.json", json); }

    TempDir dir;
    std::vector<uint8_t> a = test::random_bytes(16, 1), b = test::random_bytes(4, 2),
                         c = test::random_bytes(6, 3);
};

TEST_F(ShardedCheckpoint, Opens) {
    auto ck = Checkpoint::open(dir.path());
    EXPECT_EQ(ck->dir(), dir.path());
    EXPECT_EQ(ck->config()["model_type"], "olmoe");
    EXPECT_TRUE(ck->generation_config().is_object());
    EXPECT_TRUE(ck->generation_config().empty());
    ASSERT_EQ(ck->file_count(), 2);
    EXPECT_EQ(ck->file_path(1).filename(), "model-00002-of-00002.safetensors");
    ASSERT_EQ(ck->tensors().size(), 3u);
    EXPECT_EQ(ck->total_bytes(), 26u);
    EXPECT_EQ(ck->find("nope"), nullptr);
    EXPECT_COLI_ERROR(ck->get("nope"), "no tensor \"nope\"");

    const TensorInfo& tc = ck->get("c");
    EXPECT_EQ(tc.file, 1);
    EXPECT_EQ(tc.dtype, DType::bf16);
    auto span = ck->map(tc);
    ASSERT_EQ(span.size(), c.size());
    EXPECT_EQ(std::memcmp(span.data(), c.data(), c.size()), 0);
    auto sa = ck->map(ck->get("a"));
    EXPECT_EQ(std::memcmp(sa.data(), a.data(), a.size()), 0);
    EXPECT_EQ(ck->get("a").file, 0);
}

TEST_F(ShardedCheckpoint, MapIsThreadSafeAndMapsOnce) {
    auto ck = Checkpoint::open(dir.path());
    const TensorInfo& tb = ck->get("b");
    std::vector<const uint8_t*> seen(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = ck->map(tb).data(); });
    for (auto& t : threads) t.join();
    for (auto* p : seen) EXPECT_EQ(p, seen[0]);
    EXPECT_EQ(std::memcmp(seen[0], b.data(), b.size()), 0);
}

TEST_F(ShardedCheckpoint, MissingShard) {
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()),
                      "shard model-00002-of-00002.safetensors named by "
                      "model.safetensors.index.json is missing");
}

TEST_F(ShardedCheckpoint, TensorMissingFromShard) {
    write_index(
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
        R"("c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()),
                      "tensor \"d\" listed in model.safetensors.index.json is missing from shard "
                      "model-00002-of-00002.safetensors");
}

TEST_F(ShardedCheckpoint, TensorInTheWrongShard) {
    write_index(
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",)"
        R"("c": "model-00002-of-00002.safetensors"}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()),
                      "tensor \"b\" is in shard model-00001-of-00002.safetensors but "
                      "model.safetensors.index.json does not put it there");
}

TEST_F(ShardedCheckpoint, TensorNotInTheIndex) {
    write_index(
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()),
                      "tensor \"b\" is in shard model-00001-of-00002.safetensors but");
}

TEST_F(ShardedCheckpoint, BadIndex) {
    write_index(R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "is not a plain file name");
    write_index(R"({"weights": {}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "model.safetensors.index.json: no \"weight_map\"");
    write_index(R"({"weight_map": [1]})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "\"weight_map\" is array, expected an object");
    write_index(R"({"weight_map": {"a": 1}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "tensor \"a\": shard is number, expected a file name");
    write_index(R"({"weight_map": {"a": "x", "a": "y"}})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "duplicate key \"a\"");
    write_index(R"({"weight_map": )");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "model.safetensors.index.json: bad JSON");
}

TEST_F(ShardedCheckpoint, CorruptShard) {
    write_bytes(dir / "model-00002-of-00002.safetensors", "not a safetensors file");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()),
                      "model-00002-of-00002.safetensors: safetensors header length");
}

TEST_F(ShardedCheckpoint, GenerationConfig) {
    write_bytes(dir / "generation_config.json", R"({"eos_token_id": [1, 2]})");
    EXPECT_EQ(Checkpoint::open(dir.path())->generation_config()["eos_token_id"][1], 2);
    write_bytes(dir / "generation_config.json", R"({"eos_token_id": )");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "generation_config.json: bad JSON");
}

TEST(Checkpoint, SingleFile) {
    TempDir dir;
    write_bytes(dir / "config.json", kConfig);
    auto x = test::random_bytes(12, 9);
    safetensors_write(dir / "model.safetensors",
                      {{"x", DType::f16, {2, 3}, x.data()}, {"empty", DType::f32, {0, 5}, nullptr}});
    auto ck = Checkpoint::open(dir.path());
    ASSERT_EQ(ck->file_count(), 1);
    ASSERT_EQ(ck->tensors().size(), 2u);
    EXPECT_FALSE(ck->shapes_only());
    auto span = ck->map(ck->get("x"));
    ASSERT_EQ(span.size(), 12u);
    EXPECT_EQ(std::memcmp(span.data(), x.data(), 12), 0);
    EXPECT_TRUE(ck->map(ck->get("empty")).empty());
    TensorInfo foreign = ck->get("x");
    foreign.offset = 1 << 20;
    EXPECT_COLI_ERROR(ck->map(foreign), "is past the end");
    foreign.file = 5;
    EXPECT_COLI_ERROR(ck->map(foreign), "refers to file 5 of 1");
}

// A checkpoint of shapes only: the tensors back to back in one file that does not exist, nothing to map.
TEST(Checkpoint, ShapesOnly) {
    auto ck = Checkpoint::shapes("ref", nlohmann::json{{"model_type", "olmoe"}},
                                 {{.name = "a", .dtype = DType::bf16, .shape = {3, 4}},
                                  {.name = "b", .dtype = DType::f32, .shape = {5}}});
    EXPECT_TRUE(ck->shapes_only());
    EXPECT_EQ(ck->config()["model_type"], "olmoe");
    ASSERT_EQ(ck->tensors().size(), 2u);
    EXPECT_EQ(ck->get("a").nbytes, 24u);
    EXPECT_EQ(ck->get("b").offset, 24u);
    EXPECT_EQ(ck->get("b").nbytes, 20u);
    EXPECT_EQ(ck->total_bytes(), 44u);
    EXPECT_COLI_ERROR(ck->map(ck->get("a")), "a checkpoint of shapes only has no bytes");
    EXPECT_COLI_ERROR(
        Checkpoint::shapes("ref", {}, {{.name = "a", .shape = {1}}, {.name = "a", .shape = {2}}}),
        "ref: tensor \"a\" is listed twice");
}

TEST(CheckpointErrors, Directory) {
    TempDir dir;
    EXPECT_COLI_ERROR(Checkpoint::open(dir / "nope"), "nope: checkpoint directory does not exist");
    write_bytes(dir / "file", "x");
    EXPECT_COLI_ERROR(Checkpoint::open(dir / "file"), "file: not a directory");
}

TEST(CheckpointErrors, Config) {
    TempDir dir;
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "no config.json in the checkpoint directory");
    write_bytes(dir / "config.json", R"({"a": 1,})");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "config.json: bad JSON: parse error");
    write_bytes(dir / "config.json", "[]");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()), "config.json: expected a JSON object, got array");
    write_bytes(dir / "config.json", "{}");
    EXPECT_COLI_ERROR(Checkpoint::open(dir.path()),
                      "no safetensors weights (model.safetensors or "
                      "model.safetensors.index.json)");
}

// Weights of another format are named, with what coli reads instead.
TEST(CheckpointErrors, OtherFormatsAreNamed) {
    for (const auto& [file, what] :
         {std::pair{"pytorch_model.bin", "PyTorch pickle weights"},
          std::pair{"model-q4_k_m.gguf", "a GGUF file"}, std::pair{"flax_model.msgpack", "Flax weights"}}) {
        TempDir dir;
        write_bytes(dir / "config.json", "{}");
        write_bytes(dir / file, "x");
        EXPECT_COLI_ERROR(
            Checkpoint::open(dir.path()),
            std::string("no safetensors weights (model.safetensors or model.safetensors.index.json)"
                        "; it holds ") +
                file + " (" + what + "), which coli does not read: use the model's safetensors files");
    }
}

TEST(JsonReadFile, ReadsAndNamesTheFile) {
    TempDir dir;
    write_bytes(dir / "a.json", R"({"x": [1, 2]})");
    EXPECT_EQ(json_read_file(dir / "a.json")["x"][1], 2);
    write_bytes(dir / "b.json", "nul");
    EXPECT_COLI_ERROR(json_read_file(dir / "b.json"), "b.json: bad JSON");
    EXPECT_COLI_ERROR(json_read_file(dir / "c.json"), "c.json: cannot open");
}

}  // namespace
}  // namespace coli
