// Where each routed expert's bytes are: the checkpoint tensors of every (layer, expert), grouped into
// the fewest reads that cover them, and what each read costs the RAM budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "store/expert_store.h"

namespace coli {

// Parts of one expert that lie in the same file this close together are fetched by one read, gap
// included: reading 64 KiB more costs about 10 us at NVMe speed, a second request costs more than that in
// latency. Real checkpoints store an expert's tensors back to back (or with small alignment padding).
inline constexpr uint64_t kMaxReadGap = 64 * 1024;

// One contiguous read of a file.
struct ReadRange {
    int file = 0;         // index of the file in the Checkpoint
    uint64_t offset = 0;  // first byte needed
    uint64_t length = 0;  // bytes needed (gaps between merged parts included)
    // Bytes of the buffer the read takes: ReadFile::direct_bytes (on the O_DIRECT and the buffered path
    // alike, so that both cost the budget the same) rounded up to the BufferPool's size class.
    uint64_t buffer_bytes = 0;
};

// One tensor of an expert: which read brings it, and where it is inside that read's bytes.
struct PartRef {
    const TensorInfo* info = nullptr;  // owned by the Checkpoint
    uint32_t read = 0;                 // index into ExpertLocation::reads
    uint64_t offset = 0;               // byte offset from the start of that read's range
};

struct ExpertLocation {
    std::vector<ReadRange> reads;  // sorted by (file, offset)
    std::vector<PartRef> parts;    // in ExpertLayout::tensor_names order
    uint64_t bytes = 0;            // sum of the parts' sizes (what the expert "weighs")
    uint64_t buffer_bytes = 0;     // sum of the reads' buffers: what caching it costs the budget
};

// The byte-range index of all routed experts, built once from the checkpoint's headers.
class ExpertIndex {
public:
    // Throws coli::Error when a named tensor is missing from the checkpoint or the layout is inconsistent.
    ExpertIndex(const Checkpoint& ckpt, const ExpertLayout& layout);

    int n_layers() const { return n_layers_; }
    int n_experts() const { return n_experts_; }
    bool has_experts(int layer) const { return layer_has_[layer] != 0; }
    const ExpertLocation& at(int layer, int expert) const { return experts_[key(layer, expert)]; }
    size_t key(int layer, int expert) const { return size_t(layer) * size_t(n_experts_) + size_t(expert); }

    uint64_t max_buffer_bytes(int layer) const { return layer_max_buffer_[layer]; }  // largest in the layer
    uint64_t max_buffer_bytes() const { return max_buffer_; }                        // largest of all
    uint64_t total_bytes() const { return total_bytes_; }
    const std::vector<int>& files() const { return files_; }  // files that hold expert bytes

    // Identifies the model's expert layout (names, files, offsets, sizes, dimensions), so that a routing
    // history recorded for another model, or another version of this one, is recognised as foreign.
    const std::string& fingerprint() const { return fingerprint_; }

private:
    int n_layers_ = 0, n_experts_ = 0;
    std::vector<ExpertLocation> experts_;  // key(layer, expert); empty for layers without experts
    std::vector<char> layer_has_;
    std::vector<uint64_t> layer_max_buffer_;
    uint64_t max_buffer_ = 0, total_bytes_ = 0;
    std::vector<int> files_;
    std::string fingerprint_;
};

}  // namespace coli
