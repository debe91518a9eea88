// The inner loop of a product in f32 tiles (gemm.comp, mla_scores.comp, mla_mix.comp): a workgroup of
// kTileThreads owns a kTile x kTile block of the output, and thread t the kBlock x kBlock outputs at rows
// tile_row(t) + kSide u and columns tile_col(t) + kSide v. The operands pass through shared memory kDepth
// values of the inner dimension at a time: tile_a[k][r] for output row r, tile_b[k][c] for output column c,
// which the workgroup fills (and separates by barriers) around each tile_step().
const uint kTile = 64u;                  // outputs along each side of a workgroup's block
const uint kDepth = 16u;                 // inner-dimension values per step
const uint kSide = 16u;                  // threads along each side
const uint kBlock = kTile / kSide;       // outputs of a thread along each side, kSide apart
const uint kTileThreads = kSide * kSide;  // the workgroup

shared float tile_a[kDepth][kTile + 1u];  // +1: the loads' columns fall in different banks
shared float tile_b[kDepth][kTile + 1u];
float acc[kBlock][kBlock];

uint tile_row(uint t) {
    return t / kSide;
}
uint tile_col(uint t) {
    return t % kSide;
}

void tile_clear() {
    [[unroll]] for (uint u = 0u; u < kBlock; ++u)
        [[unroll]] for (uint v = 0u; v < kBlock; ++v) acc[u][v] = 0.0;
}

// acc += this step's tile_a rows x tile_b columns of thread t.
void tile_step(uint t) {
    const uint r = tile_row(t), c = tile_col(t);
    [[unroll]] for (uint k = 0u; k < kDepth; ++k) {
        float a[kBlock], b[kBlock];
        [[unroll]] for (uint u = 0u; u < kBlock; ++u) {
            a[u] = tile_a[k][r + kSide * u];
            b[u] = tile_b[k][c + kSide * u];
        }
        [[unroll]] for (uint u = 0u; u < kBlock; ++u)
            [[unroll]] for (uint v = 0u; v < kBlock; ++v) acc[u][v] = fma(a[u], b[v], acc[u][v]);
    }
}
