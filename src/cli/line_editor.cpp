#include "cli/line_editor.h"

#include <fcntl.h>
#include <histedit.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cwchar>
#include <iostream>

namespace coli {

namespace {

constexpr int kHistorySize = 1000;  // lines the up arrow recalls

volatile std::sig_atomic_t g_interrupted = 0;
// The handler also writes a byte here, which wakes the prompt's reader however the signal and its read
// interleave (the self-pipe trick): a flag alone is missed when Ctrl-C comes just before the read starts.
int g_wake[2] = {-1, -1};

void on_interrupt(int) {
    g_interrupted = 1;
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake[1], &byte, 1);
}

std::string g_prompt;  // libedit asks for the prompt through a plain function

char* prompt_of(EditLine*) {
    return g_prompt.data();
}

// libedit's character reader, replaced so that Ctrl-C at the prompt ends the read (libedit's own reader
// retries a read that a signal interrupted). Decodes the terminal's multibyte characters (UTF-8) as
// libedit's does.
int char_read(EditLine*, wchar_t* out) {
    static std::mbstate_t state{};
    for (;;) {
        pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0 && errno != EINTR) return -1;
        if (fds[1].revents & POLLIN) {
            char drained[64];
            while (::read(g_wake[0], drained, sizeof(drained)) > 0) {
            }
        }
        if (g_interrupted) {  // el_gets returns no line; LineEditor::read tells the caller why
            state = {};
            return -1;
        }
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char byte = 0;
        const ssize_t n = ::read(STDIN_FILENO, &byte, 1);
        if (n == 0) return 0;  // end of input
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        const size_t r = std::mbrtowc(out, &byte, 1, &state);
        if (r == static_cast<size_t>(-2)) continue;  // inside a multibyte character
        if (r == static_cast<size_t>(-1)) {          // not a character of the locale: skipped
            state = {};
            continue;
        }
        return 1;
    }
}

}  // namespace

LineEditor::LineEditor(std::string prompt) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return;
    if (::pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) return;  // plain lines, Ctrl-C ends the program
    g_prompt = std::move(prompt);
    // libedit handles UTF-8 only under a UTF-8 locale; the environment's, else C.UTF-8 (Debian has it).
    const char* locale = std::setlocale(LC_CTYPE, "");
    if (!locale || !std::strstr(locale, "UTF-8")) std::setlocale(LC_CTYPE, "C.UTF-8");
    el_ = el_init("coli", stdin, stdout, stderr);
    if (!el_) {  // no usable terminal: plain lines
        ::close(g_wake[0]);
        ::close(g_wake[1]);
        return;
    }
    history_ = history_init();
    HistEvent ev;
    history(history_, &ev, H_SETSIZE, kHistorySize);
    history(history_, &ev, H_SETUNIQUE, 1);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_PROMPT, prompt_of);
    el_set(el_, EL_HIST, history, history_);
    el_set(el_, EL_GETCFN, char_read);
    el_source(el_, nullptr);  // the user's ~/.editrc, as every libedit program reads it
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
}

LineEditor::~LineEditor() {
    if (!el_) return;
    std::signal(SIGINT, SIG_DFL);
    el_end(el_);
    history_end(history_);
    ::close(g_wake[0]);
    ::close(g_wake[1]);
}

LineEditor::Read LineEditor::read(std::string& line) {
    if (!el_) {
        if (!std::getline(std::cin, line)) return Read::end;
        return Read::line;
    }
    int count = 0;
    const char* text = el_gets(el_, &count);
    if (!text || count < 0) {
        if (interrupt_take()) return Read::interrupted;
        return Read::end;
    }
    if (count == 0) return Read::end;
    line.assign(text, static_cast<size_t>(count));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    return Read::line;
}

void LineEditor::history_add(const std::string& line) {
    if (!history_) return;
    HistEvent ev;
    history(history_, &ev, H_ENTER, line.c_str());
}

bool LineEditor::interrupt_pending() {
    return g_interrupted != 0;
}

bool LineEditor::interrupt_take() {
    const bool was = g_interrupted != 0;
    g_interrupted = 0;
    return was;
}

}  // namespace coli
