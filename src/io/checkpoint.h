// A model directory as transformers writes it: config.json, generation_config.json (optional),
// model.safetensors or model.safetensors.index.json + shards, tokenizer files (later).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/file.h"  // FileIdentity
#include "io/json.h"  // json_read_file
#include "io/safetensors.h"

namespace coli {

class Checkpoint {
public:
    // Opens and validates the directory: every header, the index (each shard it names exists and holds
    // exactly the tensors the index says), config.json parses as a JSON object. Throws coli::Error with
    // a one-line reason (missing directory, missing config.json, bad JSON, missing shard, ...).
    static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir);
    // A checkpoint of names, dtypes and shapes only, with no bytes (`coli backends` records a forward at a
    // model's real size on one): the tensors are laid out back to back in one file that does not exist,
    // whose path is `name`. Loaders and the expert store read nothing from it (shapes_only); map() throws.
    static std::unique_ptr<Checkpoint> shapes(const std::string& name, nlohmann::json config,
                                              std::vector<TensorInfo> tensors);
    ~Checkpoint();

    bool shapes_only() const { return shapes_only_; }  // made by shapes(): no bytes behind the tensors

    const std::filesystem::path& dir() const { return dir_; }
    const nlohmann::json& config() const { return config_; }                 // config.json
    const nlohmann::json& generation_config() const { return gen_config_; }  // {} when absent

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;  // nullptr when absent
    const TensorInfo& get(const std::string& name) const;   // throws coli::Error naming the tensor

    const std::filesystem::path& file_path(int file) const { return files_[file].path; }
    int file_count() const { return static_cast<int>(files_.size()); }

    // The tensor's bytes through a read-only shared mapping of its file (mapped on first use). For
    // resident (dense) weights; expert bytes go through the expert store's reads instead.
    std::span<const uint8_t> map(const TensorInfo& t) const;
    // All bytes of file `file` through the same mapping (mapped on first use, refused when the file
    // changed since the checkpoint was opened).
    std::span<const uint8_t> map_file(int file) const;
    // Throws coli::Error naming file `file` when it changed since the checkpoint was opened (FileIdentity):
    // written to, truncated, replaced or removed.
    void check_unchanged(int file) const;

    uint64_t total_bytes() const;  // sum of all tensors' nbytes

private:
    struct File {
        std::filesystem::path path;
        uint64_t size = 0;
        mutable const uint8_t* map = nullptr;  // mmap base, nullptr until first map()
        FileIdentity opened;                   // the file when its header was read
    };
    Checkpoint() = default;

    std::filesystem::path dir_;
    nlohmann::json config_, gen_config_;
    std::vector<File> files_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, size_t> by_name_;
    mutable std::mutex map_mutex_;  // guards File::map: map() may be called from loader threads
    bool shapes_only_ = false;      // see shapes()
};

}  // namespace coli
