#include "io/user_cache.h"

#include <cstdlib>

namespace coli {

std::filesystem::path user_cache_dir() {
    // The specification ignores a relative $XDG_CACHE_HOME.
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/')
        return std::filesystem::path(xdg) / "coli";
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::filesystem::path(home) / ".cache" / "coli";
    return {};
}

}  // namespace coli
