// Running the built `coli` binary from tests, as a user would.
#pragma once

#include <string>

namespace coli::test {

struct ProcessResult {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

// Runs `coli <args>` through the shell (args are shell words); captures both streams.
ProcessResult coli_run(const std::string& args);

// The last non-empty line of text.
std::string last_line(const std::string& text);

}  // namespace coli::test
