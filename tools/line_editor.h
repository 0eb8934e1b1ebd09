// The chat prompt's line input. On a terminal, and where the build has libedit (Debian's
// libedit-dev, BSD-licensed), lines are edited as in a shell: arrow keys, Home/End, emacs keys,
// and Up/Down through this session's history. Otherwise (a pipe, a file, a build without libedit)
// lines are read from the descriptor as they come.
//
// Ctrl-C: the caller's SIGINT handler sets `interrupted` and is installed without SA_RESTART; a
// read that a signal interrupts while `interrupted` is set ends with Interrupted (the flag is left
// for the caller to clear). Ctrl-D on an empty line, or the end of the input, ends with End; a
// last line without its newline still comes as a Line.
#pragma once
#include <atomic>
#include <memory>
#include <string>

namespace ridge::cli {

enum class LineRead { Line, End, Interrupted };

class LineEditor {
public:
    // in_fd / out_fd: where lines are read and the prompt and echo written. Line editing is used
    // when in_fd is a terminal and the build has libedit.
    LineEditor(int in_fd, int out_fd, const std::atomic<bool>& interrupted);
    ~LineEditor();
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    // One line, without its newline, after showing `prompt` (shown only on a terminal).
    LineRead read(const char* prompt, std::string& line);
    bool editing() const;  // libedit is in use

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace ridge::cli
