// One cached expert: its read buffers and the cache's bookkeeping. Shared by the cache and by every
// ExpertHandle to it; the cache never evicts an entry that a handle still references.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "store/expert_index.h"
#include "store/expert_store.h"
#include "store/read_buffer.h"

namespace coli {

struct ExpertHandle::Entry {
    enum class State : uint8_t { loading, ready, failed };

    int layer = 0, expert = 0;
    // Shared with the store so that a handle stays valid even if it outlives the store.
    std::shared_ptr<const ExpertIndex> index;
    const ExpertLocation* loc = nullptr;
    std::vector<ReadBuffer> buffers;  // one per loc->reads; each filled by one I/O job
    std::vector<uint8_t> nan_free;    // per part: an F8_E4M3 part holds no NaN code (set by its read's job)

    // Guarded by the store's mutex.
    State state = State::loading;
    int reads_pending = 0;
    std::string error;  // why a read failed (state == failed)
    bool out_of_memory =
        false;  // the failure was an allocation the budget's lowering could not make room for
    bool pinned = false;
    std::list<Entry*>::iterator lru;  // position in the cache's recency list
};

}  // namespace coli
