#include "common/fixture.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "io/file.h"
#include "io/safetensors.h"

namespace coli::test {

std::filesystem::path fixtures_dir() {
    return std::filesystem::path(COLI_SOURCE_DIR) / "tests" / "fixtures";
}

namespace {

std::vector<uint8_t> tensor_bytes(const ReadFile& f, const TensorInfo& t) {
    std::vector<uint8_t> b(t.nbytes);
    f.read_at(b.data(), b.size(), t.offset);
    return b;
}

std::vector<int32_t> i64_to_i32(const std::vector<uint8_t>& b) {
    std::vector<int32_t> out(b.size() / sizeof(int64_t));
    for (size_t i = 0; i < out.size(); ++i) {
        int64_t v;
        std::memcpy(&v, &b[i * sizeof(int64_t)], sizeof v);
        out[i] = static_cast<int32_t>(v);
    }
    return out;
}

}  // namespace

Fixture fixture_load(const std::string& name) {
    Fixture fx;
    fx.dir = name.find('/') == std::string::npos ? fixtures_dir() / name
                                                 : std::filesystem::path(COLI_SOURCE_DIR) / name;
    const auto path = fx.dir / "oracle.safetensors";
    const SafetensorsHeader h = safetensors_read_header(path);
    const ReadFile f(path);
    for (const TensorInfo& t : h.tensors) {
        if (t.name == "input_ids") fx.input_ids = i64_to_i32(tensor_bytes(f, t));
        if (t.name == "greedy") fx.greedy = i64_to_i32(tensor_bytes(f, t));
        if (t.name == "logits" || t.name == "mtp_logits") {
            check(t.dtype == DType::f32 && t.shape.size() == 2, "oracle {} must be F32 [rows, vocab]",
                  t.name);
            const std::vector<uint8_t> b = tensor_bytes(f, t);
            std::vector<float>& into = t.name == "logits" ? fx.logits : fx.mtp_logits;
            into.resize(b.size() / sizeof(float));
            std::memcpy(into.data(), b.data(), b.size());
            if (t.name == "logits") fx.vocab = t.shape[1];
        }
    }
    check(!fx.input_ids.empty() && !fx.logits.empty() && !fx.greedy.empty(), "{}: incomplete oracle",
          path.string());
    return fx;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        if (std::isnan(a[i])) return INFINITY;  // std::max would drop a NaN difference
        max_diff = std::max(max_diff, std::fabs(double(a[i]) - double(b[i])));
        max_ref = std::max(max_ref, std::fabs(double(b[i])));
    }
    return a.size() == b.size() ? max_diff / max_ref : INFINITY;
}

std::vector<int32_t> argmax_rows(const std::vector<float>& m, int64_t cols) {
    std::vector<int32_t> out;
    for (size_t r = 0; r + cols <= m.size(); r += cols)
        out.push_back(
            static_cast<int32_t>(std::max_element(m.begin() + r, m.begin() + r + cols) - (m.begin() + r)));
    return out;
}

}  // namespace coli::test
