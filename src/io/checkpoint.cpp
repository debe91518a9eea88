// Opening a checkpoint directory. Everything is validated at open, so that a broken download fails at
// startup with the file to fix, not in the middle of a generation.
#include "io/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/pages.h"
#include "io/checkpoint_json.h"

namespace coli {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kConfigName = "config.json";
constexpr std::string_view kGenerationConfigName = "generation_config.json";
constexpr std::string_view kSingleFileName = "model.safetensors";
constexpr std::string_view kIndexName = "model.safetensors.index.json";

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

nlohmann::json read_config(const fs::path& path) {
    return checkpoint_config_parse(file_read_text(path), path.string());
}

// Weights in a format coli does not read, by file extension, and what that format is.
struct OtherFormat {
    std::string_view extension;
    std::string_view what;
};
constexpr OtherFormat kOtherFormats[] = {
    {".bin", "PyTorch pickle weights"},    {".pt", "PyTorch pickle weights"},
    {".pth", "PyTorch pickle weights"},    {".gguf", "a GGUF file"},
    {".h5", "TensorFlow / Keras weights"}, {".msgpack", "Flax weights"}};

// "; it holds pytorch_model.bin (PyTorch pickle weights), which coli does not read" for the first file in
// dir of a format above; empty when there is none.
std::string other_weights_note(const fs::path& dir) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
        for (const OtherFormat& f : kOtherFormats)
            if (e.path().extension() == f.extension)
                return fmt::format(
                    "; it holds {} ({}), which coli does not read: use the model's "
                    "safetensors files (`hf download ORG/NAME` fetches them where published)",
                    e.path().filename().string(), f.what);
    return "";
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open(const std::filesystem::path& dir) {
    std::error_code ec;
    check(fs::exists(dir, ec), "{}: checkpoint directory does not exist", dir.string());
    check(fs::is_directory(dir, ec), "{}: not a directory (a checkpoint is a directory of files)",
          dir.string());

    std::unique_ptr<Checkpoint> ck(new Checkpoint());
    ck->dir_ = dir;
    check(is_file(dir / kConfigName), "{}: no {} in the checkpoint directory", dir.string(), kConfigName);
    ck->config_ = read_config(dir / kConfigName);
    ck->gen_config_ = is_file(dir / kGenerationConfigName) ? read_config(dir / kGenerationConfigName)
                                                           : nlohmann::json::object();

    // Shards in name order (shard name -> the tensors the index puts there). Like transformers, a
    // single model.safetensors wins over an index.
    std::map<std::string, std::set<std::string>> shards;
    const fs::path index_path = dir / kIndexName;
    const bool single = is_file(dir / kSingleFileName);
    if (single) {
        shards[std::string(kSingleFileName)];
    } else {
        check(is_file(index_path), "{}: no safetensors weights ({} or {}){}", dir.string(), kSingleFileName,
              kIndexName, other_weights_note(dir));
        for (auto& [name, shard] : checkpoint_index_parse(file_read_text(index_path), index_path.string()))
            shards[shard].insert(name);
    }

    for (auto& [shard_name, listed] : shards) {
        const int file_index = static_cast<int>(ck->files_.size());
        const fs::path path = dir / shard_name;
        check(is_file(path), "{}: shard {} named by {} is missing", dir.string(), shard_name, kIndexName);
        // Before the header is read: a change from here on shows at the next check_unchanged.
        struct stat st {};
        check(::stat(path.c_str(), &st) == 0, "{}: {}", path.string(), std::strerror(errno));
        SafetensorsHeader header = safetensors_read_header(path, file_index);
        ck->files_.push_back(File{path, static_cast<uint64_t>(st.st_size), nullptr, FileIdentity::of(st)});

        for (TensorInfo& t : header.tensors) {
            auto [it, inserted] = ck->by_name_.emplace(t.name, ck->tensors_.size());
            if (!inserted)
                fail("{}: tensor {} is in both {} and {}", dir.string(), quote(t.name),
                     ck->files_[ck->tensors_[it->second].file].path.filename().string(), shard_name);
            if (!single) {
                // Erasing what was found leaves, at the end, the tensors the index lists but the shard lacks.
                if (listed.erase(t.name) != 1)
                    fail("{}: tensor {} is in shard {} but {} does not put it there", dir.string(),
                         quote(t.name), shard_name, kIndexName);
            }
            ck->tensors_.push_back(std::move(t));
        }
        if (!listed.empty())
            fail("{}: tensor {} listed in {} is missing from shard {}", dir.string(), quote(*listed.begin()),
                 kIndexName, shard_name);
    }
    return ck;
}

std::unique_ptr<Checkpoint> Checkpoint::shapes(const std::string& name, nlohmann::json config,
                                               std::vector<TensorInfo> tensors) {
    std::unique_ptr<Checkpoint> ck(new Checkpoint());
    ck->dir_ = name;
    ck->config_ = std::move(config);
    ck->gen_config_ = nlohmann::json::object();
    ck->shapes_only_ = true;
    uint64_t offset = 0;
    for (TensorInfo& t : tensors) {
        t.file = 0;
        t.offset = offset;
        t.nbytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype);
        offset += t.nbytes;
        if (!ck->by_name_.emplace(t.name, ck->tensors_.size()).second)
            fail("{}: tensor {} is listed twice", name, quote(t.name));
        ck->tensors_.push_back(std::move(t));
    }
    ck->files_.push_back(File{name, offset, nullptr, {}});
    return ck;
}

Checkpoint::~Checkpoint() {
    for (File& f : files_)
        if (f.map) PagesUnmap{f.size}(const_cast<uint8_t*>(f.map));
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& Checkpoint::get(const std::string& name) const {
    const TensorInfo* t = find(name);
    if (!t) fail("{}: no tensor {} in the checkpoint", dir_.string(), quote(name));
    return *t;
}

std::span<const uint8_t> Checkpoint::map(const TensorInfo& t) const {
    // `t` may come from elsewhere (another checkpoint, a copy that was edited): never map past a file.
    if (t.file < 0 || t.file >= file_count())
        fail("{}: tensor {} refers to file {} of {}", dir_.string(), quote(t.name), t.file, file_count());
    const File& f = files_[t.file];
    if (t.offset > f.size || t.nbytes > f.size - t.offset)
        fail("{}: tensor {} [{}, +{}) is past the end ({} bytes)", f.path.string(), quote(t.name), t.offset,
             t.nbytes, f.size);
    if (t.nbytes == 0) return {};
    return map_file(t.file).subspan(t.offset, t.nbytes);
}

std::span<const uint8_t> Checkpoint::map_file(int file) const {
    check(file >= 0 && file < file_count(), "{}: no file {} of {}", dir_.string(), file, file_count());
    if (shapes_only_) fail("{}: a checkpoint of shapes only has no bytes to map", dir_.string());
    const File& f = files_[file];
    std::lock_guard lock(map_mutex_);
    if (!f.map) {
        // The whole file once: tensors share pages with their neighbours, and one mapping per file keeps the
        // count of mappings far below the kernel's limit for checkpoints with thousands of tensors.
        int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
        check(fd >= 0, "{}: cannot open: {}", f.path.string(), std::strerror(errno));
        // A file that changed since open holds bytes the header did not describe; a shorter one would
        // fault (SIGBUS) on access instead of failing here.
        try {
            f.opened.check_unchanged(f.path, fd);
        } catch (const Error&) {
            ::close(fd);
            throw;
        }
        void* p = pages_map(f.size, fd);
        int err = errno;
        ::close(fd);  // the mapping keeps its own reference to the file
        check(p != MAP_FAILED, "{}: cannot map {} bytes: {}", f.path.string(), f.size, std::strerror(err));
        f.map = static_cast<const uint8_t*>(p);
    }
    return {f.map, f.size};
}

void Checkpoint::check_unchanged(int file) const {
    check(file >= 0 && file < file_count(), "{}: no file {} of {}", dir_.string(), file, file_count());
    files_[file].opened.check_unchanged(files_[file].path);
}

uint64_t Checkpoint::total_bytes() const {
    uint64_t total = 0;
    for (const TensorInfo& t : tensors_) total += t.nbytes;
    return total;
}

}  // namespace coli
