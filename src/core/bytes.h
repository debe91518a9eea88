// Byte counts as messages print them: decimal units (KB, MB, GB), as --ram-gb and --vram-gb count.
#pragma once

#include <cstdint>
#include <string>

namespace coli {

// "512 B", "245.76 KB", "1.27 MB", "80.00 GB".
std::string bytes_human(uint64_t bytes);

}  // namespace coli
