// A Hugging Face repo id resolves to its snapshot in a hub cache laid out here as the hf CLI lays it out
// (blobs, refs/<revision> naming a commit, snapshots/<commit>/ of links into blobs); the environment
// variables that move the cache are honoured in huggingface_hub's order; every way it can be missing says
// what to run.
#include "io/model_path.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "test_util.h"

namespace coli {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using test::write_bytes;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kOldCommit = "fedcba9876543210fedcba9876543210fedcba98";

// Sets an environment variable for the scope (or unsets it), restoring the old value after.
class EnvVar {
public:
    EnvVar(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value->c_str(), 1);
        else
            ::unsetenv(name);
    }
    ~EnvVar() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

// HUB/models--org--name with refs/main -> kCommit and two snapshots whose files link into blobs/.
fs::path hub_repo_write(const fs::path& hub, const std::string& org, const std::string& name) {
    const fs::path repo = hub / ("models--" + org + "--" + name);
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "refs");
    write_bytes(repo / "refs" / "main", kCommit);  // the hf CLI writes the hash without a newline
    write_bytes(repo / "refs" / "v1", std::string(kOldCommit) + "\n");
    for (const char* commit : {kCommit, kOldCommit}) {
        const std::string blob = std::string("blob-") + commit;
        write_bytes(repo / "blobs" / blob, R"({"model_type": "olmoe"})");
        fs::create_directories(repo / "snapshots" / commit);
        fs::create_symlink(fs::path("../..") / "blobs" / blob, repo / "snapshots" / commit / "config.json");
    }
    return repo;
}

TEST(ModelPath, ARepoIdResolvesToItsSnapshotInTheHubCache) {
    TempDir home("hf");
    EnvVar hub_cache("HF_HUB_CACHE", std::nullopt);
    EnvVar hf_home("HF_HOME", home.path().string());
    const fs::path repo = hub_repo_write(home.path() / "hub", "moonshotai", "Kimi-K3");

    const fs::path main = model_path_resolve("moonshotai/Kimi-K3");
    EXPECT_EQ(main, repo / "snapshots" / kCommit);
    EXPECT_TRUE(fs::exists(main / "config.json"));
    EXPECT_EQ(model_path_resolve("moonshotai/Kimi-K3@v1"), repo / "snapshots" / kOldCommit);
    EXPECT_EQ(model_path_resolve(std::string("moonshotai/Kimi-K3@") + kOldCommit),
              repo / "snapshots" / kOldCommit);
    EXPECT_EQ(model_display_name(main), "moonshotai/Kimi-K3");
    EXPECT_EQ(model_display_name(main.string() + "/"), "moonshotai/Kimi-K3");
}

TEST(ModelPath, TheCacheMovesWithTheEnvironmentAsInHuggingfaceHub) {
    TempDir root("hf");
    EnvVar home("HOME", (root.path() / "home").string());
    EnvVar xdg("XDG_CACHE_HOME", std::nullopt);
    EnvVar hf_home("HF_HOME", std::nullopt);
    EnvVar hub_cache("HF_HUB_CACHE", std::nullopt);
    EXPECT_EQ(hf_hub_cache_dir(), root.path() / "home" / ".cache" / "huggingface" / "hub");
    {
        EnvVar set("XDG_CACHE_HOME", (root.path() / "xdg").string());
        EXPECT_EQ(hf_hub_cache_dir(), root.path() / "xdg" / "huggingface" / "hub");
        EnvVar set_home("HF_HOME", (root.path() / "hf").string());
        EXPECT_EQ(hf_hub_cache_dir(), root.path() / "hf" / "hub");
        EnvVar set_hub("HF_HUB_CACHE", (root.path() / "hub").string());
        EXPECT_EQ(hf_hub_cache_dir(), root.path() / "hub");
    }
    // The default place, as a user who ran `hf download` has it.
    const fs::path repo = hub_repo_write(root.path() / "home" / ".cache" / "huggingface" / "hub", "allenai",
                                         "OLMoE-1B-7B-0924");
    EXPECT_EQ(model_path_resolve("allenai/OLMoE-1B-7B-0924"), repo / "snapshots" / kCommit);
}

TEST(ModelPath, DirectoriesAreTakenAsTheyAre) {
    TempDir dir("hf");
    write_bytes(dir / "config.json", "{}");
    EXPECT_EQ(model_path_resolve(dir.path().string()), dir.path());
    // Not a repo id and not there: returned as given, for opening to say so.
    EXPECT_EQ(model_path_resolve("/nonexistent/model/dir"), fs::path("/nonexistent/model/dir"));
}

TEST(ModelPath, MissingDownloadsSayWhatToRun) {
    TempDir home("hf");
    EnvVar hub_cache("HF_HUB_CACHE", (home.path() / "hub").string());
    EXPECT_COLI_ERROR(model_path_resolve("deepseek-ai/DeepSeek-V3"), "hf download deepseek-ai/DeepSeek-V3");
    const fs::path repo = hub_repo_write(home.path() / "hub", "zai-org", "GLM-5");
    EXPECT_COLI_ERROR(model_path_resolve("zai-org/GLM-5@v2"), "hf download zai-org/GLM-5 --revision v2");
    fs::remove(repo / "snapshots" / kCommit / "config.json");
    EXPECT_COLI_ERROR(model_path_resolve("zai-org/GLM-5"), "no config.json");
    fs::remove_all(repo / "snapshots" / kCommit);
    EXPECT_COLI_ERROR(model_path_resolve("zai-org/GLM-5"), "not there");
}

TEST(ModelPath, GgufFilesAreNamedAsSuch) {
    TempDir dir("hf");
    write_bytes(dir / "model-Q4_K_M.gguf", "GGUF");
    EXPECT_COLI_ERROR(model_path_resolve((dir / "model-Q4_K_M.gguf").string()), "GGUF");
    EXPECT_COLI_ERROR(model_path_resolve(dir.path().string()), "original safetensors checkpoint");
    EXPECT_COLI_ERROR(model_path_resolve("/nowhere/model.GGUF"), "GGUF");
}

}  // namespace
}  // namespace coli
