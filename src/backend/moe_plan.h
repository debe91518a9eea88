// moe_experts' routing, inverted once for every backend: which routed rows each expert takes (the CPU runs
// an expert over them; a device backend also gathers, combines and decides whether its batched path takes
// the call). Beside backend.h rather than in device/, because the CPU backend, below the device backends,
// uses it too.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/tensor.h"

namespace coli {

// Which routed rows go to which expert. A routed row is one (token, slot) of the routing whose expert is in
// the call's span; rows are grouped by expert in span order (ascending id, the order the CPU adds them) and
// in token order within an expert.
struct MoePlan {
    std::vector<int32_t> rows;    // token of each routed row                              [total]
    std::vector<float> gains;     // router weight of each routed row                      [total]
    std::vector<int64_t> offset;  // expert i's rows: [offset[i], offset[i + 1])           [experts + 1]
    std::vector<size_t> used;     // experts with rows, in span order
    int64_t max_rows = 0;         // most rows of one expert
    int64_t max_ff = 0;           // largest d_ff of a used expert

    int64_t total() const { return static_cast<int64_t>(rows.size()); }
    int64_t rows_of(size_t i) const { return offset[i + 1] - offset[i]; }
};

// The plan of one moe_experts call; checks that every expert's shapes fit d_model.
MoePlan moe_plan(std::span<const ExpertWeights> experts, const Routing& r, int64_t d_model);

// The combine's table: token t's routed rows in the order the experts are used (as the CPU adds them), so
// that y[t] += sum over j of gains[t k + j] out[rows[t k + j]]. Slots beyond a token's rows: row -1, gain 0.
struct MoeSlots {
    std::vector<int32_t> rows;  // [n_tokens, k]
    std::vector<float> gains;   // [n_tokens, k]
};
MoeSlots moe_slots(const MoePlan& p, const Routing& r);

// What a backend's batched path (one batched GEMV for every used expert's gate and up, one activation, one
// for the downs, one combine) takes.
struct MoeBatchLimits {
    int64_t max_rows;                      // most rows of one expert a batched GEMV takes
    int max_k;                             // most slots per token the combine takes
    bool (*weight_fits)(const Weight& w);  // whether a batched GEMV takes this matrix
};
// Whether the batched path takes the call: every used expert within max_rows rows, one d_ff, one format for
// the gates and ups and one for the downs, each matrix taken by the GEMV, one activation, k within max_k.
bool moe_batchable(const MoePlan& p, std::span<const ExpertWeights> experts, const Routing& r,
                   const MoeBatchLimits& limits);

}  // namespace coli
