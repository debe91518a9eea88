// The op calls a model family's forward makes at the family's real size, as `coli backends` asks every
// backend about them (docs/design.md rule 1: the family x backend matrix is computed, never written).
// Every family is recorded through its `coli synth` architecture: its forward runs on a checkpoint of shapes
// only (the architecture's config and tensor list at the real widths; Checkpoint::shapes) over a backend
// that computes nothing (RecordBackend), a prefill of kRecordPrefill tokens and decodes of one token, once
// per weight format the family meets. tests/models/op_list_test.cpp checks the calls against the family's
// forward on fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace coli {

inline constexpr int64_t kRecordDecode = 1;     // the decode forward's tokens
inline constexpr int64_t kRecordPrefill = 512;  // the prefill forward's tokens

// One op call: the forward it came from (kRecordDecode or kRecordPrefill tokens) and the op with its
// parameters, n and format as called (weight left null).
struct OpCall {
    int64_t forward_tokens = 0;  // kRecordDecode or kRecordPrefill
    OpDesc desc;                 // the call
};

// What `coli backends` asks the backends about for one family.
struct FamilyOpCalls {
    std::string source;         // one line: how they were found ("recorded: olmoe at its real size ...")
    std::vector<OpCall> calls;  // distinct calls, in the order the forward first made them
};

// The family's op calls; throws coli::Error for an unknown family.
FamilyOpCalls family_op_calls(const std::string& family);

}  // namespace coli
