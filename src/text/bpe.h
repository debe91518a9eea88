// Byte-pair encoding of one pre-tokenized piece of bytes: repeatedly merge the adjacent pair of lowest
// rank, leftmost first on ties, until no pair has a rank. tokenizer.json ranks a pair (left id, right id) by
// the line of its merge; tiktoken by the rank of the concatenated bytes, which its loader lists per pair.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/token_table.h"

namespace coli::text {

struct BpeModel {
    PairTable merges;
    TokenTable bytes_to_id;               // every token reachable from bytes (for whole_piece_first)
    std::array<int32_t, 256> byte_ids{};  // the token of each single byte, -1 when the vocab lacks it
    // Look the whole piece up first and emit it as one token when present (tiktoken; ignore_merges).
    bool whole_piece_first = false;

    // Appends the ids of `piece` (non-empty raw bytes) to `out`. Throws coli::Error naming the byte when a
    // byte has no token.
    void encode(std::string_view piece, std::vector<int32_t>& out) const;
};

}  // namespace coli::text
