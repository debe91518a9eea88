// Files replaced whole: what coli keeps between runs (the routing history, the prefix cache) is written so
// that a reader, or a run killed halfway, sees the old file or the new one, never a part.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

namespace coli {

// Writes what `write` puts into its stream to `path`: into a temporary file beside it (named with the
// pid, so that two processes never share one), synced (io/file.h write_file_synced, where COLI_FAIL_WRITES
// injects a full disk), then renamed over `path`. Creates the directory. Returns "" on success, else
// "<the path that could not be written>: <why>", the temporary file removed and `path` as it was.
std::string file_write_atomic(const std::filesystem::path& path,
                              const std::function<void(std::ostream&)>& write);

}  // namespace coli
