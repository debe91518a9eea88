#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/file.h"
#include "test_util.h"

namespace coli {
namespace {

using test::raw_safetensors;
using test::TempDir;

constexpr DType kAllDTypes[] = {DType::f64,     DType::f32,     DType::f16,     DType::bf16,
                                DType::f8_e4m3, DType::f8_e5m2, DType::i64,     DType::i32,
                                DType::i16,     DType::i8,      DType::u8,      DType::u16,
                                DType::u32,     DType::u64,     DType::boolean, DType::f8_e8m0};

// Parses a header held in memory, as the fuzzer does.
SafetensorsHeader parse(std::string_view file) {
    return safetensors_parse_header(file, file.size(), "t.st");
}

// Every dtype, an empty tensor, a scalar and metadata survive a write and a read, bytes included.
TEST(Safetensors, RoundTripAllDTypes) {
    TempDir dir;
    std::vector<TensorWrite> writes;
    std::vector<std::vector<uint8_t>> data;
    uint32_t seed = 1;
    for (DType t : kAllDTypes) {
        std::vector<int64_t> shape = {2, 3};
        data.push_back(test::random_bytes(6 * dtype_size(t), seed++));
        writes.push_back({"w." + std::string(dtype_name(t)), t, shape, data.back().data()});
    }
    data.push_back(test::random_bytes(4, seed++));
    writes.push_back({"scalar", DType::f32, {}, data.back().data()});
    writes.push_back({"empty", DType::bf16, {0}, nullptr});
    writes.push_back({"empty2d", DType::f32, {3, 0}, nullptr});
    const std::unordered_map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "a b\nc"}};
    const auto path = dir / "model.safetensors";
    safetensors_write(path, writes, metadata);

    SafetensorsHeader h = safetensors_read_header(path, 3);
    EXPECT_EQ(h.data_start % 8, 0u);
    EXPECT_EQ(h.metadata, metadata);
    ASSERT_EQ(h.tensors.size(), writes.size());
    ReadFile file(path);
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        if (i > 0) {
            EXPECT_LE(h.tensors[i - 1].offset, h.tensors[i].offset);
        }
        const TensorInfo& t = h.tensors[i];
        auto w = std::find_if(writes.begin(), writes.end(), [&](auto& w) { return w.name == t.name; });
        ASSERT_NE(w, writes.end()) << t.name;
        EXPECT_EQ(t.dtype, w->dtype) << t.name;
        EXPECT_EQ(t.shape, w->shape) << t.name;
        EXPECT_EQ(t.file, 3);
        EXPECT_EQ(t.nbytes, uint64_t(t.numel()) * dtype_size(t.dtype));
        std::vector<uint8_t> back(t.nbytes);
        file.read_at(back.data(), back.size(), t.offset);
        if (t.nbytes > 0) {
            EXPECT_EQ(std::memcmp(back.data(), w->data, t.nbytes), 0) << t.name;
        }
    }
    EXPECT_EQ(h.tensors.back().offset + h.tensors.back().nbytes, file.size());  // packed, no trailing bytes
    EXPECT_EQ(safetensors_read_header(path).tensors.front().file, 0);
}

TEST(Safetensors, ScalarAndEmptyShapes) {
    TempDir dir;
    float x = 1.5f;
    safetensors_write(dir / "a.safetensors", {{"s", DType::f32, {}, &x}, {"e", DType::i8, {0}, nullptr}});
    SafetensorsHeader h = safetensors_read_header(dir / "a.safetensors");
    ASSERT_EQ(h.tensors.size(), 2u);
    for (const TensorInfo& t : h.tensors) {
        if (t.name == "s") {
            EXPECT_TRUE(t.shape.empty());
            EXPECT_EQ(t.numel(), 1);
            EXPECT_EQ(t.nbytes, 4u);
        } else {
            EXPECT_EQ(t.shape, std::vector<int64_t>{0});
            EXPECT_EQ(t.numel(), 0);
            EXPECT_EQ(t.nbytes, 0u);
        }
    }
    EXPECT_TRUE(h.metadata.empty());
}

// A shard of a large MoE holds tens of thousands of tensors: writing and reading them stays fast (no
// quadratic key lookups), and they come back in the order written.
TEST(Safetensors, ManyTensors) {
    constexpr int kTensors = 20000;
    TempDir dir;
    std::vector<uint16_t> values(kTensors);
    std::vector<TensorWrite> writes;
    for (int i = 0; i < kTensors; ++i) {
        values[i] = static_cast<uint16_t>(i);
        writes.push_back({"model.layers." + std::to_string(i) + ".w", DType::bf16, {1}, &values[i]});
    }
    safetensors_write(dir / "many.safetensors", writes);
    SafetensorsHeader h = safetensors_read_header(dir / "many.safetensors");
    ASSERT_EQ(h.tensors.size(), size_t(kTensors));
    for (int i = 0; i < kTensors; ++i) {
        EXPECT_EQ(h.tensors[i].name, writes[i].name);
        EXPECT_EQ(h.tensors[i].offset, h.data_start + 2 * i);
    }
}

// The header is padded with spaces, as the official writer does, so that the data starts 8-aligned.
TEST(Safetensors, HeaderPaddedWithSpaces) {
    TempDir dir;
    uint8_t b = 7;
    safetensors_write(dir / "p.safetensors", {{"x", DType::u8, {1}, &b}});
    const std::string bytes = test::read_bytes(dir / "p.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ((8 + n) % 8, 0u);
    EXPECT_EQ(bytes[8], '{');
    EXPECT_EQ(bytes.size(), 8 + n + 1);
    EXPECT_EQ(static_cast<uint8_t>(bytes.back()), 7);
    std::string_view header(bytes.data() + 8, n);
    EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
}

// Tensors come back in offset order whatever the order of the JSON keys; gaps are tolerated.
TEST(Safetensors, SortedByOffsetAndGapsAllowed) {
    auto h = parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[10,12]},)"
                                   R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                   R"("c":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
                                   16));
    ASSERT_EQ(h.tensors.size(), 3u);
    EXPECT_EQ(h.tensors[0].name, "b");
    EXPECT_EQ(h.tensors[1].name, "c");
    EXPECT_EQ(h.tensors[2].name, "a");
    EXPECT_EQ(h.tensors[2].offset, h.data_start + 10);
}

TEST(Safetensors, EmptyHeaderObjectIsValid) {
    EXPECT_TRUE(parse(raw_safetensors("{}")).tensors.empty());
}

TEST(SafetensorsErrors, TruncatedFile) {
    EXPECT_COLI_ERROR(parse(""), "shorter than the 8-byte header length");
    EXPECT_COLI_ERROR(parse("abc"), "t.st: not a safetensors file: 3 bytes");
}

TEST(SafetensorsErrors, HeaderLength) {
    EXPECT_COLI_ERROR(parse(std::string(8, '\0')), "header length is 0");
    std::string file = raw_safetensors("{}");
    file[0] = 100;  // claims 100 header bytes, the file has 2
    EXPECT_COLI_ERROR(parse(file), "header length 100 is larger than the file (10 bytes)");
    file[0] = 0;
    file[4] = 1;  // 4 GiB
    EXPECT_COLI_ERROR(parse(file), "is over the limit of 100000000 bytes");
}

TEST(SafetensorsErrors, GitLfsPointerHint) {
    EXPECT_COLI_ERROR(parse("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 12\n"),
                      "Git LFS pointer");
}

TEST(SafetensorsErrors, BadJson) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a": )")), "t.st: bad JSON: parse error");
    EXPECT_COLI_ERROR(parse(raw_safetensors("[1, 2]")), "the header does not start with '{'");
    EXPECT_COLI_ERROR(parse(raw_safetensors("{\"a\xff\": 1}")), "bad JSON");  // invalid UTF-8
}

TEST(SafetensorsErrors, DuplicateTensorName) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                            R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                            2)),
                      "duplicate key \"a\"");
}

TEST(SafetensorsErrors, OffsetsPastTheEnd) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 7)),
                      "tensor \"a\": data_offsets [0, 8] are past the end of the data (7 bytes)");
    // An end near 2^64 must not wrap around when added to the data start.
    EXPECT_COLI_ERROR(
        parse(raw_safetensors(
            R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})")),
        "past the end");
}

TEST(SafetensorsErrors, OverlappingOffsets) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                            R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                            8)),
                      "tensors \"a\" [0, 4] and \"b\" [2, 6] overlap");
    // An empty tensor strictly inside another one overlaps it too.
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                            R"("b":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                                            8)),
                      "overlap");
}

TEST(SafetensorsErrors, ReversedOffsets) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 8)),
                      "are reversed");
}

TEST(SafetensorsErrors, UnknownDType) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1)),
                      "tensor \"a\": unknown dtype \"F4\"");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,1]}})", 1)),
                      "\"dtype\" is number, expected a string");
}

TEST(SafetensorsErrors, ShapeSizeMismatch) {
    EXPECT_COLI_ERROR(
        parse(raw_safetensors(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}})", 16)),
        "data_offsets [0, 10] hold 10 bytes but shape and dtype BF16 need 12");
}

TEST(SafetensorsErrors, BadShapes) {
    auto with_shape = [](std::string shape) {
        return raw_safetensors(R"({"a":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,0]}})");
    };
    EXPECT_COLI_ERROR(parse(with_shape("[-1]")), "not a non-negative integer");
    EXPECT_COLI_ERROR(parse(with_shape("[1.5]")), "not a non-negative integer");
    EXPECT_COLI_ERROR(parse(with_shape("[\"2\"]")), "not a non-negative integer");
    EXPECT_COLI_ERROR(parse(with_shape("3")), "\"shape\" is number, expected an array");
    EXPECT_COLI_ERROR(parse(with_shape("[4294967296,4294967296]")), "element count overflows");
    EXPECT_COLI_ERROR(parse(with_shape("[18446744073709551615]")), "not a non-negative integer");
    // A zero dim makes the tensor empty, but the other dims must still be sane.
    EXPECT_COLI_ERROR(parse(with_shape("[0,4294967296,4294967296]")), "element count overflows");
}

TEST(SafetensorsErrors, BadEntries) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":[1]})")),
                      "tensor \"a\": entry is array, expected an object");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"shape":[],"data_offsets":[0,1]}})", 1)),
                      "no \"dtype\"");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", 1)),
                      "no \"shape\"");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[]}})", 1)), "no \"data_offsets\"");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[],"data_offsets":[0]}})", 1)),
                      "\"data_offsets\" must be [begin, end]");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a":{"dtype":"U8","shape":[],"data_offsets":[-1,0]}})", 1)),
                      "\"data_offsets\" must be [begin, end]");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})", 1)),
                      "empty name");
}

TEST(SafetensorsErrors, BadMetadata) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"__metadata__":{"a":1}})")),
                      "\"__metadata__\" entry \"a\" is number, expected a string");
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"__metadata__":[]})")), "expected an object of strings");
}

// Names from the file that contain newlines still give one-line messages.
TEST(SafetensorsErrors, MessagesStayOneLine) {
    EXPECT_COLI_ERROR(parse(raw_safetensors(R"({"a\nb":{"dtype":"X","shape":[],"data_offsets":[0,1]}})", 1)),
                      "tensor \"a\\nb\": unknown dtype");
}

TEST(SafetensorsErrors, ReadHeaderOfFiles) {
    TempDir dir;
    test::write_bytes(dir / "short.safetensors", "abc");
    EXPECT_COLI_ERROR(safetensors_read_header(dir / "short.safetensors"),
                      "short.safetensors: not a safetensors file");
    test::write_bytes(dir / "long.safetensors", raw_safetensors("{}").substr(0, 9));
    EXPECT_COLI_ERROR(safetensors_read_header(dir / "long.safetensors"), "is larger than the file (9 bytes)");
    EXPECT_COLI_ERROR(safetensors_read_header(dir / "missing.safetensors"),
                      "missing.safetensors: cannot open");
}

TEST(SafetensorsWrite, RejectsBadInput) {
    TempDir dir;
    uint8_t b[4] = {};
    EXPECT_COLI_ERROR(safetensors_write(dir / "x", {{"a", DType::u8, {1}, b}, {"a", DType::u8, {1}, b}}),
                      "tensor \"a\" is given twice");
    EXPECT_COLI_ERROR(safetensors_write(dir / "x", {{"a", DType::u8, {-1}, b}}), "invalid shape");
    EXPECT_COLI_ERROR(safetensors_write(dir / "x", {{"a", DType::u8, {2}, nullptr}}), "has no data");
    EXPECT_COLI_ERROR(safetensors_write(dir / "x", {{"__metadata__", DType::u8, {1}, b}}),
                      "reserved or empty name");
    EXPECT_COLI_ERROR(safetensors_write(dir / "x", {{"\xff", DType::u8, {1}, b}}), "cannot write the header");
    EXPECT_COLI_ERROR(safetensors_write(dir / "no" / "such" / "dir.safetensors", {}), "cannot create");
    EXPECT_FALSE(std::filesystem::exists(dir / "x"));
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // no partial files left behind
}

}  // namespace
}  // namespace coli
