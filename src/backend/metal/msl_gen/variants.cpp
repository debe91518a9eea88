#include "backend/metal/msl_gen/variants.h"

namespace coli::metal::gen {

namespace {
// gemv.comp's kSlots (constant_id 5 of the COLI_BATCH builds): the length of its `codes` and `scales`
// buffer arrays. Vulkan sets it to the weights of each dispatch; a Metal host binds kMetalGemvSlots and
// fills the slots its jobs do not use (a slot past the last job is never read).
constexpr uint32_t kGemvSlotsSpecId = 5;
constexpr std::string_view kGemvBatchPrefix = "gemv_batch";
}  // namespace

std::vector<std::vector<MetalFrozen>> shader_variants(std::string_view shader) {
    if (shader.starts_with(kGemvBatchPrefix)) return {{{kGemvSlotsSpecId, kMetalGemvSlots}}};
    return {{}};
}

}  // namespace coli::metal::gen
