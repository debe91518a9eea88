// config.json against the checkpoint at load, on the demo model and the fixtures with one key changed at a
// time: a layer count, an expert count, a width or vocab_size that disagrees with the tensors is a one-line
// error naming the key and the tensor, from `coli info` as from `coli run` (before, a smaller
// num_hidden_layers ran a truncated model and gave other tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/test_util.h"

namespace coli {
namespace {

namespace fs = std::filesystem;

// A copy of the demo model whose config.json has key = value.
fs::path demo_with(const fs::path& where, const std::string& key, int64_t value) {
    fs::create_directories(where);
    for (const char* name : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                             "tokenizer_config.json"})
        fs::copy_file(fs::path(COLI_SOURCE_DIR) / "models" / "demo" / name, where / name);
    nlohmann::json config = nlohmann::json::parse(test::read_bytes(where / "config.json"));
    config[key] = value;
    test::write_bytes(where / "config.json", config.dump());
    return where;
}

void expect_load_error(const fs::path& model, const std::string& key, const std::string& tensor) {
    for (const std::string command : {"info", "run -n 2 'In the beginning'"}) {
        const auto r = test::coli_run(command + " --hot-set none --model " + model.string());
        EXPECT_EQ(r.exit_code, 1) << command << ": " << r.err;
        EXPECT_EQ(r.err.rfind("coli: error: config.json: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(tensor), std::string::npos) << r.err;
    }
}

TEST(ConfigCheck, KeysThatDisagreeWithTheTensorsAreNamed) {
    test::TempDir tmp("config");
    expect_load_error(demo_with(tmp / "layers", "num_hidden_layers", 3), "num_hidden_layers is 3",
                      "model.layers.3.");
    expect_load_error(demo_with(tmp / "experts", "num_experts", 4), "expert count is 4", ".mlp.experts.4.");
    expect_load_error(demo_with(tmp / "hidden", "hidden_size", 128), "hidden_size",
                      "model.embed_tokens.weight");
    expect_load_error(demo_with(tmp / "vocab", "vocab_size", 4000), "vocab_size",
                      "model.embed_tokens.weight");
    // The demo's experts are 160 wide (OLMoE: intermediate_size); the first tensor checked is layer 0's.
    expect_load_error(demo_with(tmp / "ff", "intermediate_size", 320), "intermediate_size",
                      "model.layers.0.mlp.experts.0.");
    // A larger layer count is a missing tensor, named by the loader.
    const auto more = test::coli_run("info --hot-set none --model " +
                                     demo_with(tmp / "more", "num_hidden_layers", 5).string());
    EXPECT_EQ(more.exit_code, 1);
    EXPECT_NE(more.err.find("model.layers.4."), std::string::npos) << more.err;
}

// A copy of the fixture `name` whose config.json (its text_config where it has one) has key = value.
fs::path fixture_with(const fs::path& where, const std::string& name, const std::string& key, int64_t value) {
    fs::copy(fs::path(COLI_SOURCE_DIR) / "tests" / "fixtures" / name, where, fs::copy_options::recursive);
    nlohmann::json config = nlohmann::json::parse(test::read_bytes(where / "config.json"));
    nlohmann::json& c = config.contains("text_config") ? config["text_config"] : config;
    EXPECT_TRUE(c.contains(key)) << name << " has no " << key;
    c[key] = value;
    test::write_bytes(where / "config.json", config.dump());
    return where;
}

void expect_info_error(const fs::path& model, const std::string& key, const std::string& tensor) {
    const auto r = test::coli_run("info --hot-set none --model " + model.string());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("coli: error: config.json: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(tensor), std::string::npos) << r.err;
}

// Every family's dense tensors are checked against the widths their keys give: attention, dense MLPs,
// shared and routed experts (also Kimi's w1/w2/w3 and K3's latent projections), routers.
TEST(ConfigCheck, EveryFamilysTensorShapesAreChecked) {
    test::TempDir tmp("config");
    expect_info_error(fixture_with(tmp / "gqa", "olmoe_gqa", "num_key_value_heads", 4), "num_key_value_heads",
                      "model.layers.0.self_attn.k_proj.weight");
    expect_info_error(fixture_with(tmp / "dense", "deepseek_v3", "intermediate_size", 64),
                      "intermediate_size", "model.layers.0.mlp.gate_proj.weight");
    expect_info_error(fixture_with(tmp / "latent", "deepseek_v3", "kv_lora_rank", 16), "kv_lora_rank",
                      "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
    expect_info_error(fixture_with(tmp / "index", "glm_moe_dsa", "index_n_heads", 2), "index_n_heads",
                      "self_attn.indexer.wq_b.weight");
    expect_info_error(fixture_with(tmp / "kimi", "kimi_linear", "moe_intermediate_size", 64),
                      "moe_intermediate_size", "block_sparse_moe.experts.0.w1.weight");
    // K3's routed experts are MXFP4 codes, checked as the values they hold, in the latent width.
    expect_info_error(fixture_with(tmp / "k3", "kimi_k3", "routed_expert_hidden_size", 96),
                      "routed_expert_hidden_size", "block_sparse_moe.experts.0.w1.weight_packed");
    expect_info_error(fixture_with(tmp / "k3_experts", "kimi_k3", "moe_intermediate_size", 32),
                      "moe_intermediate_size", "block_sparse_moe.experts.0.w1.weight_packed");
}

}  // namespace
}  // namespace coli
