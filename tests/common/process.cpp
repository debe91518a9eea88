#include "common/process.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace coli::test {

namespace {
std::string file_slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}
}  // namespace

ProcessResult coli_run(const std::string& args) {
    static int counter = 0;
    const auto tmp = std::filesystem::temp_directory_path() /
                     ("coli_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    const std::string out = tmp.string() + ".out", err = tmp.string() + ".err";
    const std::string cmd = std::string(COLI_BINARY) + " " + args + " >" + out + " 2>" + err;
    const int status = std::system(cmd.c_str());
    ProcessResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = file_slurp(out);
    r.err = file_slurp(err);
    std::filesystem::remove(out);
    std::filesystem::remove(err);
    return r;
}

std::string last_line(const std::string& text) {
    size_t end = text.find_last_not_of('\n');
    if (end == std::string::npos) return "";
    size_t begin = text.rfind('\n', end);
    return text.substr(begin == std::string::npos ? 0 : begin + 1,
                       end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

}  // namespace coli::test
