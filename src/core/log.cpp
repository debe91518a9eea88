#include "core/log.h"

namespace coli {

LogLevel& log_level() {
    static LogLevel level = LogLevel::info;
    return level;
}

}  // namespace coli
