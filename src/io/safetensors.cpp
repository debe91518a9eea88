// Reading safetensors headers. The header comes from a file that may be truncated, corrupt or hostile,
// so every field is checked before any of it is used: the rest of the engine trusts TensorInfo blindly
// (it maps and reads those byte ranges).
#include "io/safetensors.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "io/file.h"
#include "io/json.h"

namespace coli {

namespace {

using nlohmann::json;

constexpr size_t kLengthBytes = 8;                 // little-endian u64 header length
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the official reader's limit (MAX_HEADER_SIZE)
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kLfsPointerStart = "version https://git-lfs";
constexpr uint64_t kMaxDim = std::numeric_limits<int64_t>::max();

uint64_t read_le64(std::string_view bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < kLengthBytes; ++i) v |= uint64_t(static_cast<uint8_t>(bytes[i])) << (8 * i);
    return v;
}

// A Git LFS pointer in place of the weights is the most common "corrupt" safetensors file.
std::string lfs_hint(std::string_view bytes) {
    return bytes.starts_with(kLfsPointerStart) ? " (this is a Git LFS pointer: run `git lfs pull`)" : "";
}

// Validates the length prefix against the file; returns the header length.
uint64_t header_length(std::string_view bytes, uint64_t file_size, std::string_view what) {
    check(file_size >= kLengthBytes && bytes.size() >= kLengthBytes,
          "{}: not a safetensors file: {} bytes, shorter than the {}-byte header length", what, file_size,
          kLengthBytes);
    const uint64_t n = read_le64(bytes);
    check(n != 0, "{}: safetensors header length is 0", what);
    check(n <= kMaxHeaderBytes, "{}: safetensors header length {} is over the limit of {} bytes{}", what, n,
          kMaxHeaderBytes, lfs_hint(bytes));
    check(n <= file_size - kLengthBytes,
          "{}: safetensors header length {} is larger than the file ({} bytes){}", what, n, file_size,
          lfs_hint(bytes));
    return n;
}

// A tensor entry's byte range relative to the start of the data.
struct Range {
    uint64_t begin = 0, end = 0;
};

// The helpers below take `where` = "FILE: tensor "NAME"", the prefix of their error messages, built once
// per tensor (check() formats its arguments even when the check passes).

std::vector<int64_t> parse_shape(const json& j, std::string_view where) {
    check(j.is_array(), "{}: \"shape\" is {}, expected an array", where, j.type_name());
    std::vector<int64_t> shape;
    shape.reserve(j.size());
    for (const json& d : j) {
        // nlohmann stores non-negative integer literals as unsigned, negative ones as signed.
        check(d.is_number_unsigned() && d.get<uint64_t>() <= kMaxDim,
              "{}: \"shape\" has an entry that is not a non-negative integer", where);
        shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    return shape;
}

Range parse_offsets(const json& j, std::string_view where) {
    check(j.is_array() && j.size() == 2 && j[0].is_number_unsigned() && j[1].is_number_unsigned(),
          "{}: \"data_offsets\" must be [begin, end] with non-negative integers", where);
    Range r{j[0].get<uint64_t>(), j[1].get<uint64_t>()};
    check(r.begin <= r.end, "{}: data_offsets [{}, {}] are reversed (end < begin)", where, r.begin, r.end);
    return r;
}

const json& field(const json& entry, std::string_view key, std::string_view where) {
    auto it = entry.find(key);
    check(it != entry.end(), "{}: no \"{}\"", where, key);
    return *it;
}

// One tensor entry; `data_bytes` is the size of the data section (file size - data start).
TensorInfo parse_tensor(const std::string& name, const json& entry, uint64_t data_bytes,
                        std::string_view what, Range* range) {
    check(!name.empty(), "{}: a tensor has an empty name", what);
    const std::string where = fmt::format("{}: tensor {}", what, quote(name));
    check(entry.is_object(), "{}: entry is {}, expected an object", where, entry.type_name());
    TensorInfo t;
    t.name = name;

    const json& dtype = field(entry, "dtype", where);
    check(dtype.is_string(), "{}: \"dtype\" is {}, expected a string", where, dtype.type_name());
    const auto& dtype_text = dtype.get_ref<const std::string&>();
    auto parsed = dtype_parse(dtype_text);
    if (!parsed) fail("{}: unknown dtype {}", where, quote(dtype_text));
    t.dtype = *parsed;

    t.shape = parse_shape(field(entry, "shape", where), where);
    auto nbytes = shape_nbytes(t.shape, t.dtype);
    check(nbytes.has_value(), "{}: shape is too large (element count overflows)", where);
    t.nbytes = *nbytes;

    *range = parse_offsets(field(entry, "data_offsets", where), where);
    check(range->end <= data_bytes, "{}: data_offsets [{}, {}] are past the end of the data ({} bytes)",
          where, range->begin, range->end, data_bytes);
    check(range->end - range->begin == t.nbytes,
          "{}: data_offsets [{}, {}] hold {} bytes but shape and dtype {} need {}", where, range->begin,
          range->end, range->end - range->begin, dtype_name(t.dtype), t.nbytes);
    return t;
}

std::unordered_map<std::string, std::string> parse_metadata(const json& j, std::string_view what) {
    check(j.is_object(), "{}: \"{}\" is {}, expected an object of strings", what, kMetadataKey,
          j.type_name());
    std::unordered_map<std::string, std::string> metadata;
    for (const auto& [key, value] : j.items()) {
        if (!value.is_string())
            fail("{}: \"{}\" entry {} is {}, expected a string", what, kMetadataKey, quote(key),
                 value.type_name());
        metadata.emplace(key, value.get<std::string>());
    }
    return metadata;
}

}  // namespace

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::optional<uint64_t> shape_nbytes(std::span<const int64_t> shape, DType dtype) {
    uint64_t nonzero = 1;
    bool empty = false;
    for (int64_t d : shape) {
        if (d < 0) return std::nullopt;
        if (d == 0) {
            empty = true;
            continue;
        }
        if (__builtin_mul_overflow(nonzero, static_cast<uint64_t>(d), &nonzero) || nonzero > kMaxDim)
            return std::nullopt;
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(nonzero, dtype_size(dtype), &bytes) || bytes > kMaxDim) return std::nullopt;
    return empty ? 0 : bytes;
}

SafetensorsHeader safetensors_parse_header(std::string_view bytes, uint64_t file_size, std::string_view what,
                                           int file_index) {
    const uint64_t n = header_length(bytes, file_size, what);
    check(bytes.size() - kLengthBytes >= n, "{}: only {} of the {} header bytes were read", what,
          bytes.size() - kLengthBytes, n);
    const std::string_view text = bytes.substr(kLengthBytes, n);
    // The official format requires the JSON to start right away; anything else is not a safetensors file.
    check(text.front() == '{', "{}: not a safetensors file: the header does not start with '{{'{}", what,
          lfs_hint(bytes));
    const json header = json_parse(text, what);
    check(header.is_object(), "{}: safetensors header is {}, expected an object", what, header.type_name());

    SafetensorsHeader out;
    out.data_start = kLengthBytes + n;
    const uint64_t data_bytes = file_size - out.data_start;
    std::vector<Range> ranges;
    for (const auto& [name, entry] : header.items()) {
        if (name == kMetadataKey) {
            out.metadata = parse_metadata(entry, what);
            continue;
        }
        Range r;
        out.tensors.push_back(parse_tensor(name, entry, data_bytes, what, &r));
        out.tensors.back().file = file_index;
        out.tensors.back().offset = out.data_start + r.begin;
        ranges.push_back(r);
    }

    // Sort by range; then two ranges overlap exactly when one begins before its predecessor ends.
    std::vector<size_t> order(ranges.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::tie(ranges[a].begin, ranges[a].end, out.tensors[a].name) <
               std::tie(ranges[b].begin, ranges[b].end, out.tensors[b].name);
    });
    for (size_t i = 1; i < order.size(); ++i) {
        const Range &prev = ranges[order[i - 1]], &cur = ranges[order[i]];
        if (cur.begin < prev.end)
            fail("{}: tensors {} [{}, {}] and {} [{}, {}] overlap", what,
                 quote(out.tensors[order[i - 1]].name), prev.begin, prev.end,
                 quote(out.tensors[order[i]].name), cur.begin, cur.end);
    }
    std::vector<TensorInfo> sorted;
    sorted.reserve(order.size());
    for (size_t i : order) sorted.push_back(std::move(out.tensors[i]));
    out.tensors = std::move(sorted);
    return out;
}

SafetensorsHeader safetensors_read_header(const std::filesystem::path& path, int file_index) {
    const std::string what = path.string();
    ReadFile file(path);
    std::string bytes(std::min<uint64_t>(file.size(), kLengthBytes), '\0');
    file.read_at(bytes.data(), bytes.size(), 0);
    const uint64_t n = header_length(bytes, file.size(), what);  // checked before allocating n bytes
    bytes.resize(kLengthBytes + n);
    file.read_at(bytes.data() + kLengthBytes, n, kLengthBytes);
    return safetensors_parse_header(bytes, file.size(), what, file_index);
}

}  // namespace coli
