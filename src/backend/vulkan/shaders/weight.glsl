// Decoding of every weight format, element by element (layouts in src/formats/format.h): each value equals
// the CPU's weight_decode_row, the code's exact value times its scale as one f32 multiply. The including
// shader declares the code words `wdata` (uint[]) and scale words `wscale` (uint[]). No 8- or 16-bit storage
// types are used, so every Vulkan 1.2 device (and MoltenVK) runs it.
#include "format.glsl"

float scale_f32(uint i) {
    return uintBitsToFloat(wscale[i]);
}

uint scale_byte(uint i) {
    return byte_of(wscale[i >> 2u], i);
}

// Element (r, c) of a [rows, cols] weight in `format`.
float weight_at(uint format, uint cols, uint r, uint c) {
    const uint i = r * cols + c;  // element index (codes of 4-bit formats: two per byte)
    if (format == kF32) return uintBitsToFloat(wdata[i]);
    if (format == kBf16) return bf16_value(bitfieldExtract(wdata[i >> 1u], int((i & 1u) * 16u), 16));
    if (format == kF16) return f16_value(bitfieldExtract(wdata[i >> 1u], int((i & 1u) * 16u), 16));
    if (format == kInt8) return int8_value(byte_of(wdata[i >> 2u], i)) * scale_f32(r);
    if (format == kFp8) {
        const uint scale_cols = (cols + kFp8Block - 1u) / kFp8Block;
        return fp8_value(byte_of(wdata[i >> 2u], i)) * scale_f32((r / kFp8Block) * scale_cols + c / kFp8Block);
    }
    const uint code = bitfieldExtract(wdata[i >> 3u], int((i & 7u) * 4u), 4);  // 2j low nibble
    if (format == kInt4)
        return float(int(code) - kInt4Zero) * scale_f32(r * (cols / kInt4Group) + c / kInt4Group);
    return kE2m1[code] * e8m0_value(scale_byte(r * (cols / kMxBlock) + c / kMxBlock));
}
