// libFuzzer target: arbitrary bytes as the JSON files of a checkpoint directory (config.json,
// generation_config.json, model.safetensors.index.json), through the same functions Checkpoint::open uses.
// coli::Error is the expected answer to bad input; anything else is a bug.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "io/checkpoint_json.h"
#include "io/json.h"

namespace {

void expect(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz_config: accepted input breaks: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        expect(coli::checkpoint_config_parse(text, "fuzz").is_object(), "config is an object");
    } catch (const coli::Error&) {
    }
    try {
        for (const auto& [name, shard] : coli::checkpoint_index_parse(text, "fuzz")) {
            expect(!name.empty(), "non-empty tensor names");
            // A shard name must stay inside the checkpoint directory.
            expect(coli::is_plain_file_name(shard) && shard.find('/') == shard.npos &&
                       shard.find("..") == shard.npos && shard.find('\0') == shard.npos,
                   "shard is a plain file name");
        }
    } catch (const coli::Error&) {
    }
    // Error messages quote names from files; quoting must accept any bytes.
    expect(!coli::quote(text).empty(), "quote never fails");
    return 0;
}
