#include "io/model_path.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <vector>

#include "core/error.h"

namespace coli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRepoPrefix = "models--";  // the hub cache's folder of a model repo: models--org--name
constexpr const char* kDefaultRevision = "main";
constexpr size_t kCommitHashLength = 40;

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

bool has_extension(const fs::path& p, const char* ext) {
    std::string e = p.extension().string();
    for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return e == ext;
}

bool is_commit_hash(const std::string& s) {
    return s.size() == kCommitHashLength && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

[[noreturn]] void gguf_fail(const std::string& what) {
    fail(
        "{}: a GGUF file; coli reads a model's original safetensors checkpoint (config.json + "
        "*.safetensors), "
        "as published on Hugging Face: download it with `hf download ORG/NAME` and pass the repo id or the "
        "directory",
        what);
}

}  // namespace

fs::path hf_hub_cache_dir() {
    if (std::string v = env_or_empty("HF_HUB_CACHE"); !v.empty()) return v;
    if (std::string v = env_or_empty("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
    if (std::string v = env_or_empty("XDG_CACHE_HOME"); !v.empty())
        return fs::path(v) / "huggingface" / "hub";
    return fs::path(env_or_empty("HOME")) / ".cache" / "huggingface" / "hub";
}

fs::path model_path_resolve(const std::string& spec) {
    const fs::path given(spec);
    std::error_code ec;
    if (fs::is_directory(given, ec)) {
        if (!fs::exists(given / "config.json", ec))
            for (const fs::directory_entry& e : fs::directory_iterator(given, ec))
                if (has_extension(e.path(), ".gguf")) gguf_fail(e.path().string());
        return given;
    }
    if (has_extension(given, ".gguf")) gguf_fail(spec);
    if (fs::exists(given, ec)) return given;  // a file: opening it as a directory says what is wrong

    // org/name or org/name@revision, as the hub names repos.
    static const std::regex kRepoId(
        R"(^([A-Za-z0-9][A-Za-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)(@([A-Za-z0-9._/-]+))?$)");
    std::smatch m;
    if (!std::regex_match(spec, m, kRepoId)) return given;
    const std::string repo = m[1].str() + "/" + m[2].str();
    const std::string revision = m[4].matched ? m[4].str() : kDefaultRevision;
    const fs::path hub = hf_hub_cache_dir();
    const fs::path repo_dir = hub / (kRepoPrefix + m[1].str() + "--" + m[2].str());
    check(fs::is_directory(repo_dir, ec),
          "{}: no such directory, and not in the Hugging Face cache ({}): download it with `hf download {}` "
          "(the hf CLI of huggingface_hub), or pass the checkpoint's directory",
          spec, hub.string(), repo);

    std::string commit = revision;
    if (!is_commit_hash(revision)) {
        std::ifstream ref(repo_dir / "refs" / revision);
        check(ref.good() && (ref >> commit),
              "{}: the Hugging Face cache has no revision '{}' of {} ({}): "
              "download it with `hf download {} --revision {}`",
              spec, revision, repo, (repo_dir / "refs").string(), repo, revision);
    }
    const fs::path snapshot = repo_dir / "snapshots" / commit;
    check(fs::is_directory(snapshot, ec),
          "{}: the Hugging Face cache names snapshot {} of {}, which is not there "
          "({}): download it again with `hf download {}`",
          spec, commit, repo, snapshot.string(), repo);
    check(fs::exists(snapshot / "config.json", ec),
          "{}: the download in {} has no config.json (incomplete, or a repo that is not a transformers "
          "checkpoint): `hf download {}` completes it",
          spec, snapshot.string(), repo);
    return snapshot;
}

std::string model_display_name(const fs::path& dir) {
    const fs::path clean = dir.lexically_normal();
    const fs::path snapshot = clean.has_filename() ? clean : clean.parent_path();
    const fs::path snapshots = snapshot.parent_path();
    const std::string repo_folder = snapshots.parent_path().filename().string();
    if (snapshots.filename() == "snapshots" && repo_folder.rfind(kRepoPrefix, 0) == 0) {
        const std::string rest = repo_folder.substr(std::string(kRepoPrefix).size());
        if (const size_t sep = rest.find("--"); sep != std::string::npos)
            return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
    }
    return snapshot.filename().string();
}

}  // namespace coli
