#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace coli {
namespace {
constexpr double kTerminalRedrawSeconds = 0.25;  // smooth enough to watch, cheap enough to ignore
constexpr double kLogLineSeconds = 5.0;          // a log gets a line every few seconds, not hundreds
constexpr double kBytesPerGB = 1e9;
}  // namespace

ProgressMeter::ProgressMeter(std::string what, uint64_t total_bytes, std::string verb, bool terminal_only)
    : what_(std::move(what)),
      verb_(std::move(verb)),
      total_(total_bytes),
      tty_(::isatty(STDERR_FILENO) != 0) {
    enabled_ = !terminal_only || (tty_ && ::isatty(STDOUT_FILENO) != 0);
}

void ProgressMeter::advance(uint64_t bytes) {
    done_ += bytes;
    if (!enabled_) return;
    const double now = timer_.seconds();
    if (now - last_print_ >= (tty_ ? kTerminalRedrawSeconds : kLogLineSeconds)) {
        last_print_ = now;
        print(false);
    }
}

void ProgressMeter::finish() {
    if (enabled_) print(true);
}

void ProgressMeter::print(bool final) {
    const double s = timer_.seconds();
    const std::string of_total = total_ ? fmt::format(" / {:.2f}", total_ / kBytesPerGB) : "";
    const std::string line =
        fmt::format("{}: {:.2f}{} GB {} in {:.1f} s ({:.2f} GB/s)", what_, done_ / kBytesPerGB, of_total,
                    verb_, s, s > 0 ? done_ / kBytesPerGB / s : 0.0);
    if (tty_)
        fmt::print(stderr, "\r{}\033[K{}", line, final ? "\n" : "");
    else
        fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
}

}  // namespace coli
