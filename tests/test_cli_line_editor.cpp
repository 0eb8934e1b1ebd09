// The chat prompt's line input (tools/line_editor.h) on a pseudo-terminal, as a user types:
// arrow keys edit the line, Up recalls the last one, UTF-8 comes through whole, Ctrl-D on an empty
// line ends, and a signal while the interrupted flag is set ends the read with Interrupted. And
// from a pipe: lines as they come, the last one without its newline too.
#include <gtest/gtest.h>
#include <pthread.h>
#include <pty.h>
#include <termios.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tools/line_editor.h"

using ridge::cli::LineEditor;
using ridge::cli::LineRead;

namespace {

// A pseudo-terminal whose master side the test types into, draining what the editor echoes.
struct Pty {
    int master = -1, slave = -1;
    std::thread drain;
    Pty() {
        if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return;
        drain = std::thread([m = master] {
            char buf[1024];
            while (::read(m, buf, sizeof buf) > 0) {
            }
        });
    }
    void type(const std::string& keys) const { ASSERT_EQ(::write(master, keys.data(), keys.size()), ssize_t(keys.size())); }
    // Types `keys` once the editor has put the terminal in its raw mode (between reads it is back
    // in the line discipline's cooked mode, which would take a Ctrl-D or an edit key itself), and
    // returns what `read` returned meanwhile.
    template <class Read>
    LineRead type_into(const std::string& keys, Read read) const {
        std::thread typist([&] {
            termios t{};
            while (tcgetattr(master, &t) == 0 && (t.c_lflag & ICANON))
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            type(keys);
        });
        const LineRead got = read();
        typist.join();
        return got;
    }
    ~Pty() {
        ::close(slave);  // the master's reads then fail (EIO) and the drain ends
        if (drain.joinable()) drain.join();
        ::close(master);
    }
};

#if RIDGE_LIBEDIT
TEST(LineEditor, EditsRecallsAndEndsOnATerminal) {
    Pty pty;
    ASSERT_GE(pty.slave, 0);
    std::atomic<bool> interrupted{false};
    LineEditor ed(pty.slave, pty.slave, interrupted);
    ASSERT_TRUE(ed.editing());
    std::string line;
    auto read = [&] { return ed.read("> ", line); };
    // "abc", Left Left, "X", Enter: the X lands before the b.
    ASSERT_EQ(pty.type_into("abc\x1b[D\x1b[DX\r", read), LineRead::Line);
    EXPECT_EQ(line, "aXbc");
    // Ctrl-A, "<", Ctrl-E, ">": both ends of the line, as emacs keys.
    ASSERT_EQ(pty.type_into("mid\x01<\x05>\r", read), LineRead::Line);
    EXPECT_EQ(line, "<mid>");
    // Up twice recalls the line before last; Enter takes it as it is.
    ASSERT_EQ(pty.type_into("\x1b[A\x1b[A\r", read), LineRead::Line);
    EXPECT_EQ(line, "aXbc");
    // UTF-8 typed and then edited: Left moves over a whole character.
    ASSERT_EQ(pty.type_into("h\xc3\xa9llo \xe2\x9c\x93\x1b[D!\r", read), LineRead::Line);
    EXPECT_EQ(line, "h\xc3\xa9llo !\xe2\x9c\x93");
    // Ctrl-D on an empty line: the end.
    EXPECT_EQ(pty.type_into("\x04", read), LineRead::End);
}

extern "C" void ignore_signal(int) {}

TEST(LineEditor, ASignalWhileInterruptedEndsTheRead) {
    Pty pty;
    ASSERT_GE(pty.slave, 0);
    struct sigaction sa {};
    sa.sa_handler = ignore_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART, as ridge chat installs its SIGINT handler
    struct sigaction old {};
    sigaction(SIGUSR1, &sa, &old);
    std::atomic<bool> interrupted{true};  // as the handler of Ctrl-C would have set it
    LineEditor ed(pty.slave, pty.slave, interrupted);
    ASSERT_TRUE(ed.editing());
    std::string line;
    const pthread_t reader = pthread_self();
    std::atomic<bool> done{false};
    // The signal is sent again until the read returns: the test does not depend on when it blocks.
    std::thread sender([&] {
        while (!done) {
            pthread_kill(reader, SIGUSR1);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    pty.type("half a line");
    const LineRead got = ed.read("> ", line);
    done = true;
    sender.join();
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_EQ(got, LineRead::Interrupted);
}
#endif

TEST(LineEditor, PipedLinesComeAsTheyAre) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const std::string text = "first\n\nsecond \xc3\xa9\nlast without newline";
    ASSERT_EQ(::write(fds[1], text.data(), text.size()), ssize_t(text.size()));
    ::close(fds[1]);
    std::atomic<bool> interrupted{false};
    LineEditor ed(fds[0], STDERR_FILENO, interrupted);
    EXPECT_FALSE(ed.editing());
    std::string line;
    ASSERT_EQ(ed.read("> ", line), LineRead::Line);
    EXPECT_EQ(line, "first");
    ASSERT_EQ(ed.read("> ", line), LineRead::Line);
    EXPECT_EQ(line, "");
    ASSERT_EQ(ed.read("> ", line), LineRead::Line);
    EXPECT_EQ(line, "second \xc3\xa9");
    ASSERT_EQ(ed.read("> ", line), LineRead::Line);
    EXPECT_EQ(line, "last without newline");
    EXPECT_EQ(ed.read("> ", line), LineRead::End);
    ::close(fds[0]);
}

}  // namespace
