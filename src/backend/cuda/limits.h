// The CUDA kernels' size limits and path thresholds: plain constants, shared by the kernels (C++17, nvcc)
// and the host code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coli {

// Decode GEMV handles up to this many tokens per pass over the weights; more tokens take the GEMM path.
inline constexpr int64_t kCudaGemvMaxTokens = 8;
// Tokens from which bf16 / f32 weights go to cuBLAS (tensor cores for bf16) instead of repeated GEMV passes.
inline constexpr int64_t kCudaBlasMinTokens = 16;
// Tokens from which the other formats are decoded to bf16 hi + lo parts for cuBLAS: the decoding writes 4
// bytes per weight, which pays only when many GEMV passes (each reading the packed weight) are saved.
inline constexpr int64_t kCudaDequantMinTokens = 128;
// Queries from which GQA attention runs as cuBLAS products (gqa_attend.cpp), which read each cached row once
// per tile of queries, instead of the key-split kernel (attention.cu), which reads it once per query.
inline constexpr int64_t kCudaAttentionBlasMinQueries = 16;
// The router kernel keeps one token's probabilities in shared memory.
inline constexpr int64_t kCudaRouteMaxExperts = 16384;

// Pinned host memory for small reads of results (routing, logits: a vocabulary of 160k floats is 640 KB);
// larger reads go to their pageable destination directly.
inline constexpr size_t kCudaReadbackBytes = size_t{1} << 20;

// Largest DSA top_k the device selection sorts in one block's shared memory (DeepSeek V3.2, GLM: 2048).
inline constexpr int kCudaDsaMaxTopK = 4096;
// The DSA scoring kernel reads the indexer's queries and keys as float4s: head_dim a multiple of this.
inline constexpr int kCudaDsaHeadDimMultiple = 4;

// Widest indexer key index_topk scores: a block's keys pass through shared memory (dsa_scores.cu; V4: 128).
inline constexpr int kCudaIndexMaxHeadDim = 160;

// Widest MLA latent (kv_lora_rank) the MLA output kernel holds in shared memory (DeepSeek, GLM, Kimi: 512).
inline constexpr int64_t kCudaMlaMaxLatent = 1024;

// KDA head sizes the recurrent kernel is compiled for (each thread keeps one state column in registers).
inline constexpr int kCudaKdaHeadDims[] = {16, 32, 64, 128};
// Longest short convolution (KDA: 4); each thread keeps its channel's window in registers.
inline constexpr int kCudaConvMaxKernel = 8;
// Most entries one res_mix call mixes (K3: 8 block snapshots and the running sum).
inline constexpr int kCudaResMixMaxEntries = 16;
// Most (token, k) slots one moe_combine launch carries in its parameters (2 KB of the 4 KB parameter
// space); more tokens take more launches.
inline constexpr int kCudaCombineMaxSlots = 256;

}  // namespace coli
