#include "io/atomic_write.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

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
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (f) write(f);
        if (f) f.close();
        if (!f) return failed(tmp, std::strerror(errno));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) return failed(path, ec.message());
    return "";
}

}  // namespace coli
