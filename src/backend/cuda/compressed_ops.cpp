// The CUDA backend's ops for DeepSeek-V4's compressed attention: copy_rows (device copies of
// ring_write_runs), compress_kv (compress_kv.cu), compressed_attention (compressed_attention.cu: attention's
// key splits over each query's window and entries) and index_topk (the DSA indexer's scores over compressed
// keys in the CPU's order, dsa_scores.cu, and dsa_select's top-k kernel, dsa_topk.cu).
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/device/ring_rows.h"

namespace coli {

using cuda::cuda_check;
using cuda::dev;

namespace {
const float* f32_data(const cuda::DeviceWeight& w) {
    return static_cast<const float*>(w.data);
}
}  // namespace

void CudaBackend::copy_rows(Tensor& dst, const Tensor& src, int64_t row0) {
    fault_check(OpKind::copy_rows);
    copy_rows_args_check(dst, src, row0);
    check_owner(dst, "copy_rows dst");
    check_owner(src, "copy_rows src");
    const int64_t cols = src.cols();
    for (const RowRun& r : ring_write_runs(src.rows(), dst.rows(), row0))
        cuda_check(cudaMemcpyAsync(dev(dst) + r.dst_row * cols, dev(src) + r.src_row * cols,
                                   static_cast<size_t>(r.count * cols) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, ctx_->compute),
                   "copy_rows");
}

void CudaBackend::compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                              const Tensor& state_gate, const CompressShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::compress_kv);
    compress_kv_args_check(kv, gate, ape, state_kv, state_gate, s, pos0, out);
    for (const Tensor* t : {&kv, &gate, &state_kv, &state_gate}) check_owner(*t, "compress_kv");
    if (out.numel() == 0) return;
    check_owner(out, "compress_kv out");
    const cuda::CompressArgs a{s.ratio, s.head_dim, s.series};
    cuda::compress_kv(dev(kv), dev(gate), f32_data(resident(ape, "compress_kv")), dev(state_kv),
                      dev(state_gate), pos0, a, out.rows(), dev(out), ctx_->compute);
}

void CudaBackend::compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring,
                                       const Tensor& entries, const Tensor* selection, const Weight& sinks,
                                       const CompressedAttentionShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::compressed_attention);
    compressed_attention_args_check(q, kv, ring, entries, selection, sinks, s, pos0, out);
    for (const Tensor* t : {&q, &kv, &ring}) check_owner(*t, "compressed_attention");
    if (s.ratio > 0) check_owner(entries, "compressed_attention entries");
    if (selection) check_owner(*selection, "compressed_attention selection");
    const int64_t n = q.rows();
    if (n == 0) return;
    check_owner(out, "compressed_attention out");
    const int64_t entry_slots = s.ratio == 0 ? 0 : selection ? selection->cols() : (pos0 + n) / s.ratio;
    const cuda::CompressedAttentionIo io{dev(q),
                                         dev(kv),
                                         dev(ring),
                                         s.ratio > 0 ? dev(entries) : nullptr,
                                         selection ? dev(*selection) : nullptr,
                                         f32_data(resident(sinks, "compressed_attention"))};
    const cuda::CompressedAttentionArgs a{s.n_heads, s.head_dim, s.window,    s.ratio,
                                          s.scale,   pos0,       ring.rows(), entry_slots};
    const cuda::AttentionSplit split = cuda::compressed_attention_split(n, a);
    const cuda::Scratch<float> partial(
        ctx_, static_cast<size_t>(cuda::compressed_attention_scratch_floats(split, a)));
    cuda::compressed_attention(io, a, n, split, partial.get(), dev(out), ctx_->compute);
}

void CudaBackend::index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                             int64_t pos0, Tensor& out) {
    fault_check(OpKind::index_topk);
    index_topk_args_check(q, weights, keys, s, pos0, out);
    for (const Tensor* t : {&q, &weights, &keys}) check_owner(*t, "index_topk");
    const int64_t n = q.rows(), total = (pos0 + n) / s.ratio;  // the most keys a query sees
    if (n == 0) return;
    check_owner(out, "index_topk out");
    const cuda::DsaArgs a{s.n_heads, s.head_dim, s.scale, s.weight_scale};
    // Scores and their top-k on the device: only the selection leaves the kernels. With no key visible
    // (total 0) dsa_topk reads no score and writes -1 everywhere.
    cuda::Scratch<float> scores(ctx_, static_cast<size_t>(n * total));
    cuda::index_scores(dev(q), dev(weights), dev(keys), n, pos0, s.ratio, a, scores.get(), ctx_->compute);
    cuda::dsa_topk(scores.get(), n, total, pos0, s.ratio, s.top_k, dev(out), ctx_->compute);
}

}  // namespace coli
