// `coli synth`: writes a random-weight checkpoint of a real architecture in its original layout
// (config.json, generation_config.json, safetensors shards and their index), streaming: the random data
// goes to disk in chunks of a few MB, so that a checkpoint of any size is written in bounded memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "synth/synth_arch.h"

namespace coli {

class ThreadPool;

// Largest piece of random data generated at once; two are alive, one being filled while the other is
// written (through the shard writer's staging buffer of the same size).
inline constexpr size_t kSynthChunkBytes = size_t{8} << 20;

struct SynthResult {
    size_t tensors = 0;
    int shards = 0;
    uint64_t bytes = 0;  // tensor bytes written
    double seconds = 0;
};

// Writes the checkpoint described by opts into opts.out, which must not exist or be empty. Progress goes
// to stderr. Throws coli::Error with a one-line reason; a failed run leaves no complete-looking shard.
SynthResult synth_write(const SynthOptions& opts, ThreadPool& pool);

}  // namespace coli
