// Recurrent-state ops on Vulkan (KDA's short convolution and the Kimi delta rule, docs/models.md 5.1), like
// the CPU reference; the states stay in device memory and are advanced in place:
//   short_conv  one invocation per channel walks the tokens with its window in registers (short_conv.comp)
//   kda         the log decays of every token first, in parallel (kda_decay.comp), then one workgroup per
//               head and one invocation per value column, which keeps its column of the state in registers:
//               token by token for decode (kda.comp), by chunks of tokens for a prefill (kda_chunk.comp)
#include "backend/vulkan/vulkan_backend_impl.h"

namespace coli {

namespace {

constexpr uint32_t kConvThreads = 64;  // short_conv.comp's local size
constexpr uint32_t kThreads = 256;     // local size of the grid-stride shaders

uint32_t ceil_div(int64_t a, int64_t b) {
    return static_cast<uint32_t>((a + b - 1) / b);
}

}  // namespace

void VulkanBackend::short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) {
    fault_check(OpKind::short_conv);
    short_conv_args_check(x, w, state, out);
    check_owner(x, "short_conv x");
    check_owner(state, "short_conv state");
    check_owner(out, "short_conv out");
    const int64_t c = x.cols();
    if (c == 0) return;
    const struct { uint32_t n, channels; } push{static_cast<uint32_t>(x.rows()), static_cast<uint32_t>(c)};
    run("short_conv", {static_cast<uint32_t>(w.cols())},
        {buffer_of(x), resident(w, "short_conv").data, buffer_of(state), buffer_of(out)}, push,
        ceil_div(c, kConvThreads));
}

void VulkanBackend::kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                        const Tensor& beta, const Weight& a_log, const Weight& dt_bias, const KdaShape& s,
                        Tensor& state, Tensor& out) {
    fault_check(OpKind::kda);
    kda_args_check(q, k, v, g, beta, a_log, dt_bias, s, state, out);
    for (const Tensor* t : {&q, &k, &v, &g, &beta, static_cast<const Tensor*>(&state)})
        check_owner(*t, "kda");
    check_owner(out, "kda out");
    const int64_t n = q.rows(), width = int64_t{s.n_heads} * s.head_dim;
    if (n == 0 || width == 0) return;
    const vk::BufferPtr log_decay = scratch(n * width);  // [n, H d]
    const struct {
        uint32_t count, width, head_dim;
        float lower_bound;
    } dp{static_cast<uint32_t>(n * width), static_cast<uint32_t>(width), static_cast<uint32_t>(s.head_dim),
         s.gate_lower_bound};
    run("kda_decay", {},
        {buffer_of(g), resident(dt_bias, "kda").data, resident(a_log, "kda").data, log_decay}, dp,
        groups_for(n * width, kThreads));
    const struct { uint32_t n, heads; } kp{static_cast<uint32_t>(n), static_cast<uint32_t>(s.n_heads)};
    run(n == 1 ? "kda" : "kda_chunk", {static_cast<uint32_t>(s.head_dim)},
        {buffer_of(q), buffer_of(k), buffer_of(v), log_decay, buffer_of(beta), buffer_of(state),
         buffer_of(out)},
        kp, static_cast<uint32_t>(s.n_heads));
}

}  // namespace coli
