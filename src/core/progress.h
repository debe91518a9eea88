// Progress of long work on stderr (writing a checkpoint, loading weights): bytes done of the total and
// the rate. Redraws one line on a terminal. Otherwise it prints a line every few seconds (logs, tests),
// or nothing at all for work that only a person watching needs to see (terminal_only).
#pragma once

#include <cstdint>
#include <string>

#include "core/timer.h"

namespace coli {

class ProgressMeter {
public:
    // total_bytes 0: the total is unknown and only bytes done are shown. verb: "written", "loaded".
    ProgressMeter(std::string what, uint64_t total_bytes, std::string verb = "written",
                  bool terminal_only = false);
    void advance(uint64_t bytes);  // bytes more are done; redraws when due
    void finish();                 // the final line, always printed

    double seconds() const { return timer_.seconds(); }

private:
    void print(bool final);

    std::string what_, verb_;
    uint64_t total_ = 0, done_ = 0;
    Timer timer_;
    double last_print_ = 0;
    bool tty_ = false;
    bool enabled_ = true;  // false: terminal_only and stdout or stderr is not a terminal
};

}  // namespace coli
