// Progress of a long write on stderr: bytes done of the total and the rate. Redraws one line on a
// terminal; prints a line every few seconds otherwise (logs, tests), so that stderr stays small.
#pragma once

#include <cstdint>
#include <string>

#include "core/timer.h"

namespace coli {

class ProgressMeter {
public:
    ProgressMeter(std::string what, uint64_t total_bytes);
    void advance(uint64_t bytes);  // bytes more are done; redraws when due
    void finish();                 // the final line, always printed

    double seconds() const { return timer_.seconds(); }

private:
    void print(bool final);

    std::string what_;
    uint64_t total_ = 0, done_ = 0;
    Timer timer_;
    double last_print_ = 0;
    bool tty_ = false;
};

}  // namespace coli
