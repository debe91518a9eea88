#include "io/atomic_write.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "io/file.h"

namespace coli {

std::string file_write_atomic(const std::filesystem::path& path,
                              const std::function<void(std::ostream&)>& write) {
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return fmt::format("{}: {}", path.parent_path().string(), ec.message());
    std::filesystem::path tmp = path;
    tmp += fmt::format(".tmp.{}", ::getpid());
    const auto failed = [&](const std::filesystem::path& where, const std::string& why) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        return fmt::format("{}: {}", where.string(), why);
    };
    std::ostringstream bytes;
    write(bytes);
    // Synced before the rename, so that a crash leaves the old file or the whole new one.
    if (const int err = write_file_synced(tmp, bytes.view()); err != 0)
        return failed(tmp, std::strerror(err));
    std::filesystem::rename(tmp, path, ec);
    if (ec) return failed(path, ec.message());
    return "";
}

}  // namespace coli
