#include "synth/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <future>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/progress.h"
#include "synth/shard_writer.h"

namespace coli {
namespace {

constexpr double kBytesPerGB = 1e9;
constexpr int kJsonIndent = 2;  // transformers writes its JSON files with indent=2, keys sorted

// A shard's tensors, by index into the architecture's tensor list.
using ShardPlan = std::vector<std::vector<size_t>>;

// transformers' sharding: tensors in state_dict order, a new shard whenever the next tensor would take
// the current one past the limit (a tensor larger than the limit gets a shard of its own). A tensor that
// goes with the previous one (SynthTensor::with_previous) never starts a shard: the decision is taken for
// the whole run at its first tensor.
ShardPlan shards_plan(const std::vector<ShardTensor>& tensors, const std::vector<SynthTensor>& specs,
                      uint64_t max_shard_bytes) {
    ShardPlan plan;
    uint64_t current = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (!specs[i].with_previous || plan.empty()) {
            uint64_t run = tensors[i].nbytes();
            for (size_t j = i + 1; j < tensors.size() && specs[j].with_previous; ++j)
                run += tensors[j].nbytes();
            if (plan.empty() || (current > 0 && current + run > max_shard_bytes)) {
                plan.emplace_back();
                current = 0;
            }
        }
        plan.back().push_back(i);
        current += tensors[i].nbytes();
    }
    return plan;
}

// transformers' names: one file is model.safetensors (no index), several are numbered from 1.
std::string shard_name(size_t i, size_t n) {
    return n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
}

void json_write(const std::filesystem::path& path, const nlohmann::json& j) {
    std::ofstream out(path, std::ios::trunc);
    out << j.dump(kJsonIndent) << "\n";
    out.close();
    check(out.good(), "{}: write failed", path.string());
}

// Streams the random values of `tensors` (in this order) into one shard: one chunk is filled on the pool
// while the previous one is being written, so that generation and disk overlap.
void shard_write(const std::filesystem::path& path, const std::vector<ShardTensor>& tensors,
                 const std::vector<const SynthTensor*>& specs, uint64_t seed, ThreadPool& pool,
                 ProgressMeter& progress) {
    ShardWriter out(path, tensors, {{"format", "pt"}});
    std::vector<uint8_t> chunks[2] = {std::vector<uint8_t>(kSynthChunkBytes),
                                      std::vector<uint8_t>(kSynthChunkBytes)};
    int filling = 0;
    size_t used = 0, in_flight = 0;
    std::future<void> writing;
    auto write_wait = [&] {
        if (!writing.valid()) return;
        writing.get();  // rethrows a failed write
        progress.advance(in_flight);
        in_flight = 0;
    };
    auto flush = [&] {
        write_wait();
        const uint8_t* data = chunks[filling].data();
        writing = std::async(std::launch::async, [&out, data, used] { out.append(data, used); });
        in_flight = used;
        filling ^= 1;
        used = 0;
    };
    for (size_t i = 0; i < tensors.size(); ++i) {
        const ShardTensor& t = tensors[i];
        const size_t elem = dtype_size(t.dtype);
        const int64_t numel = static_cast<int64_t>(t.nbytes() / elem);
        const uint64_t tseed = tensor_seed(seed, t.name);
        const int64_t zero_from = specs[i]->zero_from < 0 ? numel : std::min(numel, specs[i]->zero_from);
        for (int64_t done = 0; done < numel;) {
            const auto room = static_cast<int64_t>((kSynthChunkBytes - used) / elem);
            if (room == 0) {
                flush();
                continue;
            }
            const int64_t n = std::min(room, numel - done);
            const int64_t n_random = std::clamp<int64_t>(zero_from - done, 0, n);
            uint8_t* dst = chunks[filling].data() + used;
            if (n_random > 0) random_fill(dst, t.dtype, done, n_random, tseed, specs[i]->dist, pool);
            std::memset(dst + n_random * elem, 0, static_cast<size_t>(n - n_random) * elem);
            used += static_cast<size_t>(n) * elem;
            done += n;
        }
    }
    if (used > 0) flush();
    write_wait();
    out.finish();
}

}  // namespace

SynthResult synth_write(const SynthOptions& opts, ThreadPool& pool) {
    const SynthArch& arch = synth_arch_find(opts.arch);
    check(!opts.out.empty(), "coli synth: give the output directory with --out");
    check(opts.shard_gb > 0, "--shard-gb must be > 0, got {}", opts.shard_gb);
    std::error_code ec;
    check(!std::filesystem::exists(opts.out, ec) || std::filesystem::is_empty(opts.out, ec),
          "coli synth: {} exists and is not empty; give a new directory", opts.out.string());
    std::filesystem::create_directories(opts.out, ec);
    check(!ec, "coli synth: cannot create {}: {}", opts.out.string(), ec.message());

    const nlohmann::json config = arch.config(opts);
    const std::vector<SynthTensor> specs = arch.tensors(config);
    std::vector<ShardTensor> tensors;
    uint64_t total = 0;
    for (const SynthTensor& s : specs) {
        tensors.push_back({s.name, s.dtype.value_or(opts.dtype), s.shape});
        total += tensors.back().nbytes();
    }
    const auto max_shard = static_cast<uint64_t>(opts.shard_gb * kBytesPerGB);
    const ShardPlan plan = shards_plan(tensors, specs, max_shard);

    ProgressMeter progress(fmt::format("synth {}", opts.out.filename().string()), total);
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t s = 0; s < plan.size(); ++s) {
        // Within a file the safetensors library orders tensors by name, so that is how real shards are,
        // unless the architecture says otherwise (file_key).
        auto key = [&](size_t i) -> const std::string& {
            return specs[i].file_key.empty() ? specs[i].name : specs[i].file_key;
        };
        std::vector<size_t> order = plan[s];
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
        std::vector<ShardTensor> shard;
        std::vector<const SynthTensor*> shard_specs;
        const std::string file = shard_name(s, plan.size());
        for (size_t i : order) {
            shard.push_back(tensors[i]);
            shard_specs.push_back(&specs[i]);
            weight_map[tensors[i].name] = file;
        }
        shard_write(opts.out / file, shard, shard_specs, opts.seed, pool, progress);
    }
    if (plan.size() > 1)
        json_write(opts.out / "model.safetensors.index.json",
                   {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
    json_write(opts.out / "config.json", config);
    json_write(opts.out / "generation_config.json", arch.generation_config(config));
    progress.finish();
    return {tensors.size(), static_cast<int>(plan.size()), total, progress.seconds()};
}

}  // namespace coli
