// libFuzzer target: arbitrary bytes as a whole safetensors file. coli::Error is the expected answer to bad
// input; a crash, a sanitizer report, any other exception, or a header accepted in spite of breaking the
// promises of safetensors.h (checked below) is a bug.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

namespace {

void expect(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz_safetensors: accepted header breaks: %s\n", what);
    std::abort();
}

// What the rest of the engine relies on when it reads or maps the byte ranges of an accepted header.
void check_invariants(const coli::SafetensorsHeader& h, uint64_t file_size) {
    expect(h.data_start >= 8 && h.data_start <= file_size, "data_start within the file");
    const coli::TensorInfo* prev = nullptr;
    for (const coli::TensorInfo& t : h.tensors) {
        expect(!t.name.empty(), "non-empty names");
        expect(t.file == 0, "file index as given");
        expect(t.numel() >= 0, "non-negative numel");
        expect(t.nbytes == uint64_t(t.numel()) * coli::dtype_size(t.dtype), "nbytes = numel * dtype size");
        expect(t.offset >= h.data_start, "offset after the header");
        expect(t.offset <= file_size && t.nbytes <= file_size - t.offset, "range within the file");
        if (prev) {
            expect(prev->offset <= t.offset, "sorted by offset");
            expect(prev->offset + prev->nbytes <= t.offset, "no overlap");
        }
        prev = &t;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        check_invariants(coli::safetensors_parse_header(bytes, size, "fuzz"), size);
    } catch (const coli::Error&) {
        // the expected outcome for malformed input
    }
    return 0;
}
