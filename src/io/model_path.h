// What a --model argument names: a checkpoint directory, or a Hugging Face repo id ("org/name", or
// "org/name@revision") found in the local Hugging Face cache, laid out as the hf CLI and transformers
// download it: HUB/models--org--name/{refs/main, snapshots/<commit>/...}.
#pragma once

#include <filesystem>
#include <string>

namespace coli {

// The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub.
std::filesystem::path hf_hub_cache_dir();

// The checkpoint directory that spec names: an existing directory as it is, else a repo id's snapshot in
// the hub cache. Throws coli::Error saying what to do for a repo that is not downloaded, a revision that
// is not there, an incomplete download or a GGUF file (coli reads the original safetensors checkpoint).
// Anything else is returned as given (opening it says that it does not exist).
std::filesystem::path model_path_resolve(const std::string& spec);

// A model's name for people and APIs: "org/name" for a snapshot in the hub cache, else the directory's
// name.
std::string model_display_name(const std::filesystem::path& dir);

}  // namespace coli
