// DeepSeek-V4's hyper-connections on Vulkan: the residual stream kept as S parallel streams. hc_weights
// turns each token's mixing logits into its pre / post / Sinkhorn-normalized comb weights
// (hc_weights.comp, one invocation per token: a token's weights are a few dozen floats), hc_collapse
// and hc_expand sum the streams with them (hc_collapse.comp, hc_expand.comp), and repeat_cols makes the
// first streams, copies of the embedding (copy_cols.comp).
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kThreads = 256;  // local size of the shaders

}  // namespace

void VulkanBackend::hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                               Tensor& out) {
    fault_check(OpKind::hc_weights);
    hc_weights_args_check(mix, base, scale, s, out);
    check_owner(mix, "hc_weights mix");
    check_owner(out, "hc_weights out");
    if (mix.numel() == 0) return;
    const struct {
        uint32_t n, streams, cols, iters;
        float eps;
    } push{static_cast<uint32_t>(mix.rows()), static_cast<uint32_t>(s.streams),
           static_cast<uint32_t>(mix.cols()), static_cast<uint32_t>(s.sinkhorn_iters), s.eps};
    run("hc_weights", {},
        {buffer_of(mix), resident(base, "hc_weights").data, resident(scale, "hc_weights").data,
         buffer_of(out)},
        push, groups_for(mix.rows(), kThreads));
}

void VulkanBackend::hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out) {
    fault_check(OpKind::hc_collapse);
    hc_collapse_args_check(x, weights, streams, out);
    check_owner(x, "hc_collapse x");
    check_owner(weights, "hc_collapse weights");
    if (out.numel() == 0) return;
    const struct {
        uint32_t n, d, streams, w_cols;
    } push{static_cast<uint32_t>(x.rows()), static_cast<uint32_t>(out.cols()), static_cast<uint32_t>(streams),
           static_cast<uint32_t>(weights.cols())};
    run("hc_collapse", {}, {buffer_of(x), buffer_of(weights), buffer_of(out)}, push,
        groups_for(out.numel(), kThreads));
}

void VulkanBackend::hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                              Tensor& out) {
    fault_check(OpKind::hc_expand);
    hc_expand_args_check(x, y, weights, streams, out);
    for (const Tensor* t : {&x, &y, &weights}) check_owner(*t, "hc_expand");
    if (out.numel() == 0) return;
    const struct {
        uint32_t n, d, streams;
    } push{static_cast<uint32_t>(x.rows()), static_cast<uint32_t>(y.cols()), static_cast<uint32_t>(streams)};
    run("hc_expand", {}, {buffer_of(x), buffer_of(y), buffer_of(weights), buffer_of(out)}, push,
        groups_for(out.numel(), kThreads));
}

void VulkanBackend::repeat_cols(const Tensor& x, int times, Tensor& out) {
    fault_check(OpKind::repeat_cols);
    check_shape(out, x.rows(), int64_t{times} * x.cols(), "repeat_cols out");
    check_owner(x, "repeat_cols x");
    if (out.numel() == 0) return;
    const CopyColsPush push{static_cast<uint32_t>(x.rows()), static_cast<uint32_t>(x.cols()), 0,
                            static_cast<uint32_t>(out.cols()), static_cast<uint32_t>(x.cols())};
    run("copy_cols", {}, {buffer_of(x), buffer_of(out)}, push, groups_for(out.numel(), kThreads));
}

}  // namespace coli
