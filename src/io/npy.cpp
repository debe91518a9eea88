#include "io/npy.h"

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "core/error.h"

namespace coli {

namespace {
constexpr char kMagic[] = "\x93NUMPY\x01\x00";  // magic + version 1.0
constexpr size_t kMagicLen = 8;
constexpr size_t kHeaderAlign = 64;  // header padded so data starts aligned
}  // namespace

void npy_write_f32(const std::filesystem::path& path, std::span<const int64_t> shape,
                   std::span<const float> data) {
    int64_t numel = 1;
    std::string dims;
    for (int64_t d : shape) {
        numel *= d;
        dims += fmt::format("{}, ", d);
    }
    check(numel == static_cast<int64_t>(data.size()), "npy: shape holds {} values, data has {}", numel,
          data.size());
    if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(3, 4)" but "(3,)"
    std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
    const size_t unpadded = kMagicLen + 2 + header.size() + 1;
    header.append((kHeaderAlign - unpadded % kHeaderAlign) % kHeaderAlign, ' ');
    header += '\n';

    std::ofstream f(path, std::ios::binary);
    check(f.good(), "cannot write {}", path.string());
    const uint16_t len = static_cast<uint16_t>(header.size());
    f.write(kMagic, kMagicLen);
    f.put(static_cast<char>(len & 0xff));
    f.put(static_cast<char>(len >> 8));
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
    check(f.good(), "error writing {}", path.string());
}

}  // namespace coli
