// DeepSeek-V4's compressed-attention state on Vulkan: ring and append writes of rows (copy_rows: buffer
// copies) and the KV compressor's windowed softmax pooling (compress_kv.comp). The attention over raw keys
// and compressed entries, and the indexer over compressed keys, are in attention.cpp beside the other
// attention ops whose shaders they share.
#include <algorithm>

#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

void VulkanBackend::copy_rows(Tensor& dst, const Tensor& src, int64_t row0) {
    fault_check(OpKind::copy_rows);
    copy_rows_args_check(dst, src, row0);
    check_owner(dst, "copy_rows dst");
    check_owner(src, "copy_rows src");
    const int64_t m = src.rows(), ring = dst.rows();
    const uint64_t row_bytes = src.cols() * sizeof(float);
    // Only the last `ring` rows of src land (a later row overwrites an earlier one): at most two runs of
    // rows, up to the ring's end and then from its start, each one copy.
    bool first_run = true;
    for (int64_t i = std::max<int64_t>(0, m - ring); i < m;) {
        const int64_t at = (row0 + i) % ring, count = std::min(m - i, ring - at);
        if (!first_run) stream_.concurrent_next();  // the runs write different rows of dst
        stream_.copy(buffer_of(src), i * row_bytes, buffer_of(dst), at * row_bytes, count * row_bytes);
        first_run = false;
        i += count;
    }
}

}  // namespace coli
