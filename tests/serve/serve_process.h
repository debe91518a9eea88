// A `coli serve` child process for a test: started on a free port (--port 0; the port is read from its
// startup line), talked to with cpp-httplib's client, stopped with SIGTERM. Also running other programs
// (node, chromium, python) with their output captured.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"

namespace coli::test {

// The demo model the server tests serve, and its name in the API.
inline const std::filesystem::path kDemoModel = std::filesystem::path(COLI_SOURCE_DIR) / "models/demo";
inline constexpr const char* kDemoId = "demo";

// A greedy completion of the demo model's usual prompt, as a request body.
inline std::string greedy_completion_body(int max_tokens) {
    return nlohmann::json{
        {"model", kDemoId}, {"prompt", "In the beginning"}, {"max_tokens", max_tokens}, {"temperature", 0}}
        .dump();
}

// One sample value of /metrics, by the exact text before the value ("name" or "name{labels}").
inline double metric_value(const std::string& text, const std::string& series) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    ADD_FAILURE() << "no series " << series << " in /metrics";
    return -1;
}

class ServeProcess {
public:
    // Starts `coli serve --model <model> --port 0 --hot-set none <flags>` and waits until it listens.
    explicit ServeProcess(const std::vector<std::string>& flags = {},
                          const std::filesystem::path& model = kDemoModel)
        : dir_("serve") {
        // No hot set: servers of tests running in parallel would share one routing-history file in the model.
        std::vector<std::string> args = {COLI_BINARY, "serve", "--model",   model.string(),
                                         "--port",    "0",     "--hot-set", "none"};
        args.insert(args.end(), flags.begin(), flags.end());
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const std::string err_path = (dir_ / "stderr.txt").string();
        pid_ = ::fork();
        if (pid_ == 0) {  // child: only async-signal-safe calls until exec
            const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int null = ::open("/dev/null", O_WRONLY);
            if (err < 0 || null < 0 || ::dup2(null, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0)
                ::_exit(127);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        EXPECT_GT(pid_, 0) << "fork failed";
        const std::regex listening(R"(listening on http://[^:]+:(\d+))");
        const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
        while (std::chrono::steady_clock::now() < deadline) {
            std::smatch m;
            const std::string text = err();
            if (std::regex_search(text, m, listening)) {
                port_ = std::stoi(m[1].str());
                return;
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                ADD_FAILURE() << "coli serve exited before listening: " << text;
                return;
            }
            std::this_thread::sleep_for(kPoll);
        }
        ADD_FAILURE() << "coli serve did not start listening in time: " << err();
    }

    ~ServeProcess() { stop(); }
    ServeProcess(const ServeProcess&) = delete;
    ServeProcess& operator=(const ServeProcess&) = delete;

    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

    // A client of this server with generous timeouts (the machine may be busy with other tests).
    std::unique_ptr<httplib::Client> client() const {
        auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
        c->set_read_timeout(kIoTimeout);
        c->set_write_timeout(kIoTimeout);
        c->set_connection_timeout(kIoTimeout);
        return c;
    }

    // What the server wrote to stderr so far.
    std::string err() const { return read_bytes(dir_ / "stderr.txt"); }

    // The server's resident set now (VmRSS), in bytes.
    uint64_t rss_bytes() const { return status_bytes("VmRSS:"); }
    // The server's peak resident set so far (VmHWM), in bytes.
    uint64_t peak_rss_bytes() const { return status_bytes("VmHWM:"); }

    // Sends SIGTERM and waits; returns the exit code (-1 when killed by a signal or already gone).
    int stop() {
        if (pid_ <= 0) return -1;
        ::kill(pid_, SIGTERM);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

private:
    // A "<field> N kB" line of /proc/<pid>/status, in bytes (0 when absent).
    uint64_t status_bytes(const std::string& field) const {
        std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
        std::string line;
        constexpr uint64_t kKiB = 1024;
        while (std::getline(in, line))
            if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * kKiB;
        return 0;
    }

    static constexpr std::chrono::seconds kStartTimeout{60};
    static constexpr std::chrono::milliseconds kPoll{50};
    static constexpr time_t kIoTimeout = 60;  // seconds

    TempDir dir_;  // the captured stderr
    pid_t pid_ = -1;
    int port_ = 0;
};

struct CommandResult {
    int exit_code = -1;  // -1 when it did not exit normally
    std::string output;  // what it wrote to stdout
};

// Runs a shell command line and captures its stdout (add "2>&1" to capture stderr too).
inline CommandResult command_run(const std::string& cmd) {
    CommandResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// True when running under CI (CI=true in the environment): missing test tools fail there, never skip.
inline bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci && *ci && std::string(ci) != "false";
}

}  // namespace coli::test
