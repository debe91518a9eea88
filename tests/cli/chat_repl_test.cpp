// `coli chat` as a person uses it, in a pseudo-terminal: the arrow keys edit the line and recall the
// history, Ctrl-C at the prompt drops the line and during a reply stops the reply (the session goes on),
// Ctrl-D quits. And, through a pipe, a conversation longer than the context drops its oldest turns.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/process.h"
#include "common/test_util.h"

namespace coli {
namespace {

using Clock = std::chrono::steady_clock;
// The longest wait for an expected output (a loaded machine).
constexpr auto kWait = std::chrono::seconds(60);
// Between seeing a prompt and typing, as a person would (see Pty::type).
constexpr auto kTypingPause = std::chrono::milliseconds(150);

// A child process on the slave side of a pseudo-terminal; the test types into the master side and reads
// what the terminal shows (stdout and stderr together).
class Pty {
public:
    explicit Pty(const std::vector<std::string>& args) {
        std::vector<std::string> argv_text = {COLI_BINARY};
        argv_text.insert(argv_text.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (std::string& a : argv_text) argv.push_back(a.data());
        argv.push_back(nullptr);
        winsize size{};
        size.ws_row = 50;
        size.ws_col = 200;
        pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
        if (pid_ == 0) {
            ::setenv("TERM", "xterm", 1);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        EXPECT_GT(pid_, 0) << "forkpty failed";
    }
    ~Pty() {
        if (pid_ > 0 && !exited_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (master_ >= 0) ::close(master_);
    }

    // Types as a person does, a moment after the prompt is drawn: a key that arrives before libedit has
    // put the terminal into its own mode is handled by the terminal's line discipline instead (echoed
    // twice, Ctrl-D taken as the end of a cooked line), which is a race of the test, not of the chat.
    void type(const std::string& keys) {
        std::this_thread::sleep_for(kTypingPause);
        press(keys);
    }
    // Types at once (Ctrl-C into a reply that is being written).
    void press(const std::string& keys) {
        ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
    }

    // Reads until `text` appears after position `from` of everything shown; returns its position, or
    // npos (and a failure) at the deadline or the end of output.
    size_t wait_for(const std::string& text, size_t from) {
        const auto deadline = Clock::now() + kWait;
        for (;;) {
            if (const size_t at = shown_.find(text, from); at != std::string::npos) return at;
            if (!read_some(deadline)) {
                ADD_FAILURE() << "never shown: '" << text << "'; the terminal shows:\n"
                              << shown_.substr(from);
                return std::string::npos;
            }
        }
    }

    // Reads until more than `size` bytes have been shown.
    bool wait_beyond(size_t size) {
        const auto deadline = Clock::now() + kWait;
        while (shown_.size() <= size)
            if (!read_some(deadline)) return false;
        return true;
    }

    // The exit code once the child exits, or -2 when it is still running at the deadline.
    int exit_code() {
        int status = 0;
        const auto deadline = Clock::now() + kWait;
        while (Clock::now() < deadline) {
            const pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                exited_ = true;
                return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            }
            read_some(Clock::now() + std::chrono::milliseconds(50));  // keep the terminal drained
        }
        return -2;
    }

    const std::string& shown() const { return shown_; }

private:
    bool read_some(Clock::time_point deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        pollfd p{master_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
        char buffer[4096];
        const ssize_t n = ::read(master_, buffer, sizeof(buffer));
        if (n <= 0) return false;  // EIO: the child closed the terminal
        shown_.append(buffer, static_cast<size_t>(n));
        return true;
    }

    int master_ = -1;
    pid_t pid_ = -1;
    bool exited_ = false;
    std::string shown_;
};

constexpr const char* kLeft = "\x1b[D";
constexpr const char* kUp = "\x1b[A";
constexpr const char* kCtrlC = "\x03";
constexpr const char* kCtrlD = "\x04";
constexpr const char* kPrompt = "> ";

TEST(ChatRepl, EditsRecallsInterruptsAndQuits) {
    Pty chat({"chat", "--hot-set", "none", "--max-tokens", "500", "--threads", "1"});
    size_t at = chat.wait_for(kPrompt, 0);
    ASSERT_NE(at, std::string::npos);

    // "/sats", three steps left, "t": the line is "/stats" only if the arrow keys move the cursor.
    chat.type(fmt::format("/sats{}{}{}t\r", kLeft, kLeft, kLeft));
    at = chat.wait_for("no turn yet", at);
    ASSERT_NE(at, std::string::npos);
    at = chat.wait_for(kPrompt, at);
    // The up arrow recalls "/stats".
    chat.type(fmt::format("{}\r", kUp));
    at = chat.wait_for("no turn yet", at + 1);
    ASSERT_NE(at, std::string::npos);
    at = chat.wait_for(kPrompt, at);

    // Ctrl-C at the prompt drops the line typed so far; the session goes on.
    chat.type("never sent");
    chat.wait_for("never sent", at);
    chat.type(kCtrlC);
    at = chat.wait_for("Ctrl-D or /exit quits", at);
    ASSERT_NE(at, std::string::npos);
    at = chat.wait_for(kPrompt, at);

    // Ctrl-C during a reply stops that reply. The demo model is fast and may end a reply by itself before
    // the key arrives, so a few messages are tried; sampling makes their lengths differ.
    bool stopped = false;
    for (int attempt = 0; attempt < 8 && !stopped; ++attempt) {
        const std::string message = fmt::format("Tell me all the words of the prophets, part {}", attempt);
        chat.type(message + "\r");
        const size_t echoed = chat.wait_for(message, at);
        ASSERT_NE(echoed, std::string::npos);
        ASSERT_TRUE(chat.wait_beyond(echoed + message.size() + 2)) << "no reply began";  // "\r\n", then text
        chat.press(kCtrlC);
        const size_t prompt = chat.wait_for(std::string("\n") + kPrompt, echoed);
        ASSERT_NE(prompt, std::string::npos);
        stopped = chat.shown().substr(echoed, prompt - echoed).find("(reply stopped)") != std::string::npos;
        at = prompt + 1;
    }
    EXPECT_TRUE(stopped) << "Ctrl-C never stopped a reply:\n" << chat.shown();

    // The session is alive after all of that, and Ctrl-D on an empty line ends it normally.
    chat.type("/stats\r");
    at = chat.wait_for("last turn:", at);
    ASSERT_NE(at, std::string::npos);
    chat.wait_for(kPrompt, at);
    chat.type(kCtrlD);
    EXPECT_EQ(chat.exit_code(), 0) << chat.shown();
}

// Turns that outgrow the demo model's context of 512 tokens: the oldest are dropped (said on stderr), the
// chat goes on, and a message longer than the context by itself is an error that ends nothing.
TEST(ChatRepl, AFullContextDropsTheOldestTurns) {
    test::TempDir tmp("chat");
    std::string long_message;
    for (int i = 0; i < 12; ++i) long_message += "And God said, Let there be light: and there was light. ";
    std::string too_long;
    for (int i = 0; i < 8; ++i) too_long += long_message;
    const auto input = tmp.path() / "turns.txt";
    std::ofstream(input) << long_message << "\n"
                         << long_message << "\n"
                         << long_message << "\n"
                         << too_long << "\n/stats\n";
    const auto r = test::coli_run(
        fmt::format("chat --temperature 0 --max-tokens 64 --hot-set none < {}", input.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("(context full: the oldest"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/reset starts over"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("coli: error: the message is"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("last turn:"), std::string::npos) << "the chat went on after the error:\n" << r.err;
}

}  // namespace
}  // namespace coli
