// The lines of `coli chat`: edited with the arrow keys and kept in a history (libedit) when stdin is a
// terminal, read plainly otherwise (a pipe, a file). Ctrl-C there does not end the program: at the prompt
// it clears the line, during a reply it sets a flag that the chat polls to stop the reply.
#pragma once

#include <string>

typedef struct editline EditLine;
typedef struct history History;

namespace coli {

// One at a time: the prompt and the Ctrl-C flag are the process's.
class LineEditor {
public:
    explicit LineEditor(std::string prompt);
    ~LineEditor();
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    enum class Read {
        line,         // a line was read (without its newline)
        interrupted,  // Ctrl-C at the prompt: the line was dropped
        end,          // end of input (Ctrl-D on an empty line, or the end of a pipe)
    };
    Read read(std::string& line);
    void history_add(const std::string& line);  // a line the user may recall with the up arrow

    bool interactive() const { return el_ != nullptr; }
    // Ctrl-C since the last call to interrupt_take(), which clears it. Only an interactive editor catches
    // Ctrl-C; elsewhere it keeps ending the program.
    static bool interrupt_pending();
    static bool interrupt_take();

private:
    EditLine* el_ = nullptr;
    History* history_ = nullptr;
};

}  // namespace coli
