// Decode GEMV on Vulkan: the grid plan and the dispatches of shaders/gemv.comp.
#include "backend/vulkan/gemv.h"

#include <algorithm>
#include <array>
#include <string>

#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr int64_t kChunkBytes = 16;                // gemv.comp reads codes as uvec4
constexpr int64_t kGemvThreads = 128;              // gemv.comp's workgroup
constexpr int64_t kLanes = 32;                     // gemv.comp's lanes per team
constexpr int64_t kTeams = kGemvThreads / kLanes;  // teams per workgroup
constexpr int64_t kTargetTeams = 2048;             // teams per dispatch that keep a large GPU's loads busy
constexpr int64_t kMinChunksPerLane = 2;           // a lane's chunks when teams split a row group
constexpr uint32_t kTeamRowsFewTokens = 4;         // row slots of a team for up to kFewTokens tokens
constexpr uint32_t kTeamRowsFewTokens4Bit = 8;     // ... in the 4-bit formats (see team_rows)
constexpr uint32_t kTeamRowsManyTokens = 2;        // ... and beyond (registers for the per-token sums)
constexpr uint32_t kFewTokens = 2;
constexpr int64_t kShortRowChunksPerLane = 2;  // a short row's chunks per lane, at most (team_rows)
constexpr uint32_t kIntDotMaxTokens = 2;  // gemv.comp's kDotMaxTokens: the int4 dot-product path's tokens
constexpr uint32_t kXPlanesThreads = 64;  // gemv_xplanes.comp's workgroup
constexpr int64_t kXPlaneChunkCols = 32;  // xplanes.glsl's kXPlaneCols: int4 columns of a chunk
constexpr int64_t kXPlaneFloats = 24;     // a chunk's planes in 4-byte words: kXPlanes * kXPlaneWords
constexpr int64_t kXMetaFloats = 2;       // a chunk's 2^-k and sum of X

struct XPlanesPush {
    uint32_t rows, cols;
    uint32_t gather;  // 1: row r is x row xrows[r]
};

struct GemvPush {
    uint32_t rows, cols;
    uint32_t parts;       // teams that split one row group's chunks
    float beta;           // SiTU: the gate's tanh bound; clamped SwiGLU: the limit
    float linear_beta;    // SiTU: the up projection's tanh bound
    uint32_t x_cols;      // x's row width: cols, or groups cols (grouped)
    uint32_t group_rows;  // rows that read one block of cols columns of x: rows, or rows / groups
    std::array<uint32_t, vk::kGemvMaxJobs + 1> first;
};
static_assert(sizeof(GemvPush) <= vk::kPushBytes, "gemv.comp's push constants");

int64_t row_bytes(const vk::DeviceWeight& w) {
    return static_cast<int64_t>(WeightView{w.format, 1, w.cols, nullptr, nullptr}.data_bytes());
}

// How a dispatch covers its jobs: each team takes `rows` rows of each matrix; `parts` teams split a row
// group's chunks while the dispatch has fewer than kTargetTeams teams (short, wide matrices would leave most
// of the GPU idle) and every lane keeps kMinChunksPerLane chunks.
struct GemvPlan {
    uint32_t rows = 1, parts = 1;
    int64_t groups = 1;  // workgroups per job
};

// Row slots of a team. Each x load serves every row slot, and in the 4-bit formats, where a lane's chunk
// spans 32 columns of x, the x loads bound the speed: they take 8 slots, the other formats 4 (int8 and fp8
// ran slower with 8). The int4 dot-product path (`dot`), whose x loads are fewer, takes 4 in short rows,
// where a lane reads few chunks and more resident workgroups pay more than x reuse (docs/benchmarks.md).
uint32_t team_rows(Format f, uint32_t tokens, bool dot, int64_t chunks) {
    static_assert(kTeamRowsFewTokens4Bit <= vk::kGemvMaxTeamRows &&
                  kTeamRowsFewTokens <= vk::kGemvMaxTeamRows);
    if (tokens > kFewTokens) return kTeamRowsManyTokens;
    if (dot && chunks <= kShortRowChunksPerLane * kLanes) return kTeamRowsFewTokens;
    return f == Format::int4_g64 || f == Format::mxfp4 ? kTeamRowsFewTokens4Bit : kTeamRowsFewTokens;
}

GemvPlan gemv_plan(const vk::DeviceWeight& w, uint32_t tokens, uint32_t mats, size_t jobs, bool dot) {
    GemvPlan p;
    const int64_t chunks = row_bytes(w) / kChunkBytes;
    p.rows = team_rows(w.format, tokens, dot, chunks) / mats;
    const int64_t row_groups = (w.rows + p.rows - 1) / p.rows;
    while (p.parts < kTeams && row_groups * static_cast<int64_t>(jobs * p.parts) < kTargetTeams &&
           chunks >= kMinChunksPerLane * kLanes * (p.parts * 2))
        p.parts *= 2;
    const int64_t groups_per_workgroup = kTeams / p.parts;
    p.groups = (row_groups + groups_per_workgroup - 1) / groups_per_workgroup;
    return p;
}

// The name of a GEMV pipeline: gemv[_batch][_dot]_{subgroup,shared} (vulkan/backend.cmake's variants).
std::string gemv_pipeline(bool batch, bool dot, bool subgroup) {
    return std::string(batch ? "gemv_batch" : "gemv") + (dot ? "_dot" : "") +
           (subgroup ? "_subgroup" : "_shared");
}

}  // namespace

namespace vk {

bool gemv_fits(const DeviceWeight& w, int64_t groups) {
    const bool whole_teams =
        groups == 1 || (w.rows % groups == 0 && (w.rows / groups) % kGemvMaxTeamRows == 0);
    return row_bytes(w) % kChunkBytes == 0 && whole_teams;
}

}  // namespace vk

void VulkanBackend::gemv(const vk::GemvJobs& g) {
    const size_t jobs = g.first.size() - 1;
    check(g.weights.size() == jobs * g.mats && jobs >= 1 && (g.mats == 1 || g.mats == 2),
          "vulkan gemv: {} weights for {} jobs of {} matrices", g.weights.size(), jobs, g.mats);
    const vk::DeviceWeight& w0 = *g.weights.front();
    uint32_t tokens = 1;
    for (size_t j = 0; j < jobs; ++j) {
        tokens = std::max(tokens, g.first[j + 1] - g.first[j]);
        check(g.first[j + 1] > g.first[j], "vulkan gemv: job {} has no tokens", j);
    }
    for (const vk::DeviceWeight* w : g.weights)
        check(w->format == w0.format && w->rows == w0.rows && w->cols == w0.cols && vk::gemv_fits(*w),
              "vulkan gemv: the jobs' matrices differ in format or shape, or are not whole chunks");
    check(tokens <= kVulkanGemvMaxTokens, "vulkan gemv: {} tokens in one job", tokens);
    check(g.groups == 1 || (jobs == 1 && g.mats == 1 && !g.xrows && vk::gemv_fits(w0, g.groups)),
          "vulkan gemv: {} groups of a [{}, {}] weight", g.groups, w0.rows, w0.cols);
    const auto format = static_cast<uint32_t>(w0.format);
    const auto glu = static_cast<uint32_t>(g.act.kind);
    const bool sub = ctx_->subgroup_arithmetic;
    const vk::BufferPtr xrows = g.xrows ? g.xrows : placeholder_;

    // int4 on integer dot products: x as byte planes, laid out once for every job (gemv_xplanes.comp); not
    // grouped, whose planes would be laid out per block.
    const bool dot =
        ctx_->int_dot && w0.format == Format::int4_g64 && tokens <= kIntDotMaxTokens && g.groups == 1;
    vk::BufferPtr planes = placeholder_, meta = placeholder_;
    if (dot) {
        const int64_t rows = g.first.back(), chunks = w0.cols / kXPlaneChunkCols;
        planes = scratch(rows * chunks * kXPlaneFloats);
        meta = scratch(rows * chunks * kXMetaFloats);
        const XPlanesPush push{static_cast<uint32_t>(rows), static_cast<uint32_t>(w0.cols),
                               g.xrows ? 1u : 0u};
        run("gemv_xplanes", {}, {g.x, xrows, planes, meta}, push, groups_for(rows * chunks, kXPlanesThreads));
    }

    // One matrix over x as it is: the plain shader, its weight in slot 0.
    if (jobs == 1 && g.mats == 1 && !g.xrows) {
        const GemvPlan p = gemv_plan(w0, tokens, 1, 1, dot);
        GemvPush push{uint32_t(w0.rows),
                      uint32_t(w0.cols),
                      p.parts,
                      0,
                      0,
                      uint32_t(g.groups * w0.cols),
                      uint32_t(w0.rows / g.groups),
                      {0, tokens}};
        const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(p.groups, vk::kMaxGroups));
        const auto gy = static_cast<uint32_t>((p.groups + gx - 1) / gx);
        const vk::BufferPtr codes[] = {w0.data}, scales[] = {w0.scales};
        run_slots(gemv_pipeline(false, dot, sub), {format, tokens, p.rows, 1, glu},
                  {g.x, g.y, placeholder_, planes, meta}, vk::WeightSlots{codes, scales}, push, gx, gy, 1);
        return;
    }
    check(ctx_->weight_slots >= g.mats, "vulkan gemv: the device binds no batch of weights");
    const size_t per_dispatch = std::min<size_t>(vk::kGemvMaxJobs, ctx_->weight_slots / g.mats);
    for (size_t j0 = 0; j0 < jobs; j0 += per_dispatch) {
        const size_t n = std::min(per_dispatch, jobs - j0);
        const GemvPlan p = gemv_plan(w0, tokens, g.mats, n, dot);
        GemvPush push{uint32_t(w0.rows), uint32_t(w0.cols), p.parts,           g.act.beta,
                      g.act.linear_beta, uint32_t(w0.cols), uint32_t(w0.rows), {}};
        for (size_t j = 0; j <= n; ++j) push.first[j] = g.first[j0 + j];
        std::vector<vk::BufferPtr> codes, scales;
        for (size_t i = j0 * g.mats; i < (j0 + n) * g.mats; ++i) {
            codes.push_back(g.weights[i]->data);
            scales.push_back(g.weights[i]->scales);
        }
        const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(p.groups, vk::kMaxGroups));
        const auto gy = static_cast<uint32_t>((p.groups + gx - 1) / gx);
        run_slots(
            gemv_pipeline(true, dot, sub),
            {format, tokens, p.rows, g.mats, glu, static_cast<uint32_t>(codes.size()), g.xrows ? 1u : 0u},
            {g.x, g.y, xrows, planes, meta}, vk::WeightSlots{codes, scales}, push, gx, gy,
            static_cast<uint32_t>(n));
    }
}

}  // namespace coli
