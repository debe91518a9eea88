// DeepSeek-V4's compressed-attention state on Vulkan: ring and append writes of rows (copy_rows: buffer
// copies of ring_write_runs) and the KV compressor's windowed softmax pooling (compress_kv.comp). The
// attention over raw keys and compressed entries, and the indexer over compressed keys, are in attention.cpp
// beside the other attention ops whose shaders they share.
#include "backend/device/ring_rows.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kThreads = 256;  // local size of compress_kv.comp

}  // namespace

void VulkanBackend::copy_rows(Tensor& dst, const Tensor& src, int64_t row0) {
    fault_check(OpKind::copy_rows);
    copy_rows_args_check(dst, src, row0);
    check_owner(dst, "copy_rows dst");
    check_owner(src, "copy_rows src");
    const uint64_t row_bytes = src.cols() * sizeof(float);
    bool first_run = true;
    for (const RowRun& r : ring_write_runs(src.rows(), dst.rows(), row0)) {
        if (!first_run) stream_.concurrent_next();  // the runs write different rows of dst
        stream_.copy(buffer_of(src), r.src_row * row_bytes, buffer_of(dst), r.dst_row * row_bytes,
                     r.count * row_bytes);
        first_run = false;
    }
}

void VulkanBackend::compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape,
                                const Tensor& state_kv, const Tensor& state_gate, const CompressShape& s,
                                int64_t pos0, Tensor& out) {
    fault_check(OpKind::compress_kv);
    compress_kv_args_check(kv, gate, ape, state_kv, state_gate, s, pos0, out);
    for (const Tensor* t : {&kv, &gate, &state_kv, &state_gate}) check_owner(*t, "compress_kv");
    if (out.numel() == 0) return;
    const struct {
        uint32_t pos0, w0, windows, ratio, hd, series;
    } push{static_cast<uint32_t>(pos0),       static_cast<uint32_t>(pos0 / s.ratio),
           static_cast<uint32_t>(out.rows()), static_cast<uint32_t>(s.ratio),
           static_cast<uint32_t>(s.head_dim), static_cast<uint32_t>(s.series)};
    run("compress_kv", {},
        {buffer_of(kv), buffer_of(gate), resident(ape, "compress_kv").data, buffer_of(state_kv),
         buffer_of(state_gate), buffer_of(out)},
        push, groups_for(out.numel(), kThreads));
}

}  // namespace coli
