// The routing history of `--hot-set auto` (the default) goes to the user's cache, $XDG_CACHE_HOME/coli,
// in a file named by the model's fingerprint, and never into the model's directory; a cache that cannot be
// written costs one warning and nothing else, and a full disk (COLI_FAIL_WRITES) leaves the older history as
// it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "common/process.h"
#include "common/test_util.h"

namespace coli {
namespace {

namespace fs = std::filesystem;

std::set<std::string> names_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
        names.insert(e.path().filename().string());
    return names;
}

// A copy of the demo model's own files (not a routing history an older coli left beside it).
fs::path demo_copy(const fs::path& where) {
    fs::create_directories(where);
    for (const char* name : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                             "tokenizer_config.json"})
        fs::copy_file(fs::path(COLI_SOURCE_DIR) / "models" / "demo" / name, where / name);
    return where;
}

TEST(HotSetCache, TheRoutingHistoryGoesToTheUsersCacheNotTheModel) {
    test::TempDir tmp("hotset");
    const fs::path model = demo_copy(tmp / "model");
    const std::set<std::string> before = names_in(model);
    ::setenv("XDG_CACHE_HOME", (tmp / "cache").c_str(), 1);
    const auto first = test::coli_run("run --model " + model.string() + " -n 8 'In the beginning'");
    const auto second = test::coli_run("run --model " + model.string() + " -n 8 'In the beginning'");
    ::unsetenv("XDG_CACHE_HOME");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_EQ(names_in(model), before) << "nothing was written into the model's directory";
    ASSERT_TRUE(fs::is_directory(tmp / "cache" / "coli"));
    const std::set<std::string> cached = names_in(tmp / "cache" / "coli");
    ASSERT_EQ(cached.size(), 1u);
    const std::string file = *cached.begin();
    EXPECT_EQ(file.rfind("hotset-", 0), 0u) << file;
    EXPECT_EQ(file.size(), std::string("hotset-.json").size() + 16) << "named by the 16-digit fingerprint";
    EXPECT_NE(test::read_bytes(tmp / "cache" / "coli" / file).find("\"counts\""), std::string::npos);
    EXPECT_EQ(second.err.find("warning"), std::string::npos) << second.err;
}

TEST(HotSetCache, AnUnwritableCacheIsOneWarning) {
    test::TempDir tmp("hotset");
    const fs::path model = demo_copy(tmp / "model");
    test::write_bytes(tmp / "not-a-directory", "x");  // no directory can be made under a file, even by root
    ::setenv("XDG_CACHE_HOME", (tmp / "not-a-directory").c_str(), 1);
    const auto r = test::coli_run("run --model " + model.string() + " -n 8 'In the beginning'");
    ::unsetenv("XDG_CACHE_HOME");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    size_t warnings = 0;
    for (size_t at = r.err.find("routing history"); at != std::string::npos;
         at = r.err.find("routing history", at + 1))
        ++warnings;
    EXPECT_EQ(warnings, 1u) << r.err;
    EXPECT_NE(r.err.find("--hot-set none"), std::string::npos) << r.err;
    EXPECT_NE(r.out.size(), 0u) << "the run went on";
}

// A full disk while the history is saved (COLI_FAIL_WRITES fails every write with ENOSPC half-way): one
// warning, the file of the run before intact and no temporary file left; the tokens are a clean run's.
TEST(HotSetCache, AFullDiskKeepsTheOlderHistoryWithOneWarning) {
    test::TempDir tmp("hotset");
    const fs::path model = demo_copy(tmp / "model");
    const fs::path cache = tmp / "cache" / "coli";
    const std::string run = "run --model " + model.string() + " -n 8 --temperature 0 'In the beginning'";
    ::setenv("XDG_CACHE_HOME", (tmp / "cache").c_str(), 1);
    const auto first = test::coli_run(run);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const std::set<std::string> cached = names_in(cache);
    ASSERT_EQ(cached.size(), 1u);
    const fs::path file = cache / *cached.begin();
    const std::string before = test::read_bytes(file);
    ::setenv("COLI_FAIL_WRITES", "1000000", 1);
    const auto full = test::coli_run(run);
    ::unsetenv("COLI_FAIL_WRITES");
    const std::string after_full = test::read_bytes(file);
    const auto clean = test::coli_run(run);  // saves the history that the full disk kept from being saved
    ::unsetenv("XDG_CACHE_HOME");

    ASSERT_EQ(full.exit_code, 0) << full.err;
    EXPECT_EQ(full.out, clean.out);
    EXPECT_NE(full.err.find("No space left on device"), std::string::npos) << full.err;
    EXPECT_EQ(full.err.find("warning:"), full.err.rfind("warning:")) << "one warning:\n" << full.err;
    EXPECT_EQ(after_full, before) << "the older history is intact";
    EXPECT_EQ(names_in(cache), cached) << "no temporary file left";
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    EXPECT_NE(test::read_bytes(file), before) << "the clean run saved a history the full disk did not";
}

}  // namespace
}  // namespace coli
