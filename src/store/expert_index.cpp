#include "store/expert_index.h"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fnv1a.h"
#include "io/file.h"
#include "store/buffer_pool.h"

namespace coli {

namespace {

// Groups the parts (in layout order) into reads and records where each part lands.
ExpertLocation locate(const std::vector<const TensorInfo*>& infos) {
    ExpertLocation loc;
    std::vector<size_t> order(infos.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::pair(infos[a]->file, infos[a]->offset) < std::pair(infos[b]->file, infos[b]->offset);
    });
    loc.parts.resize(infos.size());
    for (size_t i : order) {
        const TensorInfo& t = *infos[i];
        const bool extends = !loc.reads.empty() && loc.reads.back().file == t.file &&
                             t.offset <= loc.reads.back().offset + loc.reads.back().length + kMaxReadGap;
        if (!extends) loc.reads.push_back(ReadRange{t.file, t.offset, 0, 0});
        ReadRange& r = loc.reads.back();
        // max(): a part may lie inside the range already (the same tensor named twice).
        r.length = std::max(r.length, t.offset + t.nbytes - r.offset);
        loc.parts[i] = PartRef{&t, static_cast<uint32_t>(loc.reads.size() - 1), t.offset - r.offset};
        loc.bytes += t.nbytes;
    }
    for (ReadRange& r : loc.reads) {
        r.buffer_bytes = pool_size_class(ReadFile::direct_bytes(r.length, r.offset));
        loc.buffer_bytes += r.buffer_bytes;
    }
    return loc;
}

}  // namespace

ExpertIndex::ExpertIndex(const Checkpoint& ckpt, const ExpertLayout& layout)
    : n_layers_(layout.n_layers), n_experts_(layout.n_experts) {
    check(n_layers_ > 0 && n_experts_ > 0,
          "expert store: the model layout has {} layers and {} experts per layer", n_layers_, n_experts_);
    check(bool(layout.tensor_names), "expert store: the model layout does not name its expert tensors");

    experts_.resize(size_t(n_layers_) * size_t(n_experts_));
    layer_has_.assign(n_layers_, 0);
    layer_max_buffer_.assign(n_layers_, 0);
    std::set<int> files;
    Fnv1a hash;
    hash.u64(uint64_t(n_layers_));
    hash.u64(uint64_t(n_experts_));

    for (int l = 0; l < n_layers_; ++l) {
        for (int e = 0; e < n_experts_; ++e) {
            const std::vector<std::string> names = layout.tensor_names(l, e);
            if (e == 0) layer_has_[l] = !names.empty();
            check(names.empty() == !layer_has_[l],
                  "expert store: layer {} names tensors for some experts but not for expert {}", l,
                  names.empty() ? e : 0);
            std::vector<const TensorInfo*> infos;
            infos.reserve(names.size());
            for (const std::string& name : names) {
                const TensorInfo* t = ckpt.find(name);
                check(t != nullptr,
                      "expert store: tensor {} of expert {} in layer {} is not in the checkpoint {}", name, e,
                      l, ckpt.dir().string());
                infos.push_back(t);
                hash.str(name);
                hash.str(ckpt.file_path(t->file).filename().string());
                hash.u64(t->offset);
                hash.u64(t->nbytes);
                files.insert(t->file);
            }
            ExpertLocation& loc = experts_[key(l, e)];
            loc = locate(infos);
            layer_max_buffer_[l] = std::max(layer_max_buffer_[l], loc.buffer_bytes);
            total_bytes_ += loc.bytes;
        }
        max_buffer_ = std::max(max_buffer_, layer_max_buffer_[l]);
    }
    check(std::find(layer_has_.begin(), layer_has_.end(), 1) != layer_has_.end(),
          "expert store: the model layout names no expert tensors in any of its {} layers", n_layers_);
    files_.assign(files.begin(), files.end());
    fingerprint_ = fmt::format("{:016x}", hash.value());
}

}  // namespace coli
