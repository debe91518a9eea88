// coli_msl_gen: the Metal kernels from the Vulkan backend's SPIR-V (docs/design.md "Metal").
//
// Usage: coli_msl_gen MANIFEST OUT.metal OUT_TABLE.cpp
//   MANIFEST: one shader a line, "name path", path a glslc -mfmt=c file (metal/backend.cmake writes it from
//   the Vulkan build's list).
// Every shader becomes one kernel per variant (variants.h), or is skipped with a reason when it needs what
// MSL lacks; any other failure (a Metal limit, an implicit buffer) exits 1 with a message naming the kernel.
// The outputs are rewritten only when their text changes.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/metal/msl_gen/library.h"
#include "backend/metal/msl_gen/spirv_text.h"
#include "backend/metal/msl_gen/translate.h"
#include "backend/metal/msl_gen/variants.h"

namespace {

using namespace coli::metal;
using namespace coli::metal::gen;

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("cannot read {}", path));
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_if_changed(const std::string& path, const std::string& text) {
    {
        std::ifstream in(path, std::ios::binary);
        if (in) {
            std::ostringstream s;
            s << in.rdbuf();
            if (s.str() == text) return;
        }
    }
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", path));
}

struct Shader {
    std::string name, path;
};

std::vector<Shader> read_manifest(const std::string& path) {
    std::istringstream in(read_file(path));
    std::vector<Shader> shaders;
    std::string line;
    while (std::getline(in, line)) {
        const size_t space = line.find(' ');
        if (line.empty()) continue;
        if (space == std::string::npos)
            throw std::runtime_error(fmt::format("{}: '{}' is not 'name path'", path, line));
        shaders.push_back({line.substr(0, space), line.substr(space + 1)});
    }
    std::sort(shaders.begin(), shaders.end(),
              [](const Shader& a, const Shader& b) { return a.name < b.name; });
    if (shaders.empty()) throw std::runtime_error(fmt::format("{} lists no shaders", path));
    return shaders;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        fmt::print(stderr, "usage: coli_msl_gen MANIFEST OUT.metal OUT_TABLE.cpp\n");
        return 2;
    }
    try {
        std::vector<Kernel> kernels;
        std::vector<Skipped> skipped;
        for (const Shader& s : read_manifest(argv[1])) {
            const std::vector<uint32_t> spirv = spirv_from_c_text(read_file(s.path));
            if (std::string reason = unsupported_reason(spirv); !reason.empty()) {
                skipped.push_back({s.name, std::move(reason)});
                continue;
            }
            for (const std::vector<MetalFrozen>& frozen : shader_variants(s.name)) {
                const auto base = static_cast<uint32_t>(kernels.size()) * kMetalConstantsPerKernel;
                kernels.push_back(translate(s.name, spirv, frozen, base));
            }
        }
        write_if_changed(argv[2], msl_library(kernels));
        write_if_changed(argv[3], kernel_table_source(kernels, skipped));
        fmt::print("coli_msl_gen: {} Metal kernels, {} Vulkan shaders skipped\n", kernels.size(),
                   skipped.size());
        for (const Skipped& s : skipped) fmt::print("  skipped {}: {}\n", s.shader, s.reason);
    } catch (const std::exception& e) {
        fmt::print(stderr, "coli_msl_gen: {}\n", e.what());
        return 1;
    }
    return 0;
}
