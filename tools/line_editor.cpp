// LineEditor: libedit's native interface (el_gets with this session's History), with its own
// character reader so that Ctrl-C is told apart from a signal libedit should ride out; else read(2).
#include "tools/line_editor.h"

#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstring>
#include <cwchar>

#if RIDGE_LIBEDIT
#include <histedit.h>
#endif

namespace ridge::cli {

struct LineEditor::Impl {
    int in_fd, out_fd;
    const std::atomic<bool>& interrupted;
    std::string pending;  // plain reads: bytes read past the last line
#if RIDGE_LIBEDIT
    EditLine* el = nullptr;
    History* hist = nullptr;
    FILE* in = nullptr;
    FILE* out = nullptr;
    std::string prompt;
    std::string old_locale;
#endif

    Impl(int in, int out, const std::atomic<bool>& intr) : in_fd(in), out_fd(out), interrupted(intr) {}

    LineRead plain(std::string& line) {
        line.clear();
        while (true) {
            if (const size_t nl = pending.find('\n'); nl != std::string::npos) {
                line = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                return LineRead::Line;
            }
            char buf[4096];
            const ssize_t n = ::read(in_fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) {
                if (interrupted) return LineRead::Interrupted;
                continue;
            }
            if (n <= 0) {  // the end: a last line without its newline still counts
                line = std::move(pending);
                pending.clear();
                return line.empty() ? LineRead::End : LineRead::Line;
            }
            pending.append(buf, size_t(n));
        }
    }

#if RIDGE_LIBEDIT
    // libedit's character reader: one character from the terminal's bytes (UTF-8 under the
    // locale set below). 1: a character; 0: the end of the input; -1: Ctrl-C.
    static int read_char(EditLine* el, wchar_t* c) {
        Impl* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        std::mbstate_t state{};
        while (true) {
            char byte;
            const ssize_t n = ::read(self->in_fd, &byte, 1);
            if (n < 0 && errno == EINTR) {
                if (self->interrupted) return -1;
                continue;
            }
            if (n <= 0) return 0;
            const size_t r = std::mbrtowc(c, &byte, 1, &state);
            if (r == size_t(-2)) continue;  // more bytes of this character to come
            if (r == size_t(-1)) {          // not the locale's encoding: take the byte as it is
                *c = wchar_t(static_cast<unsigned char>(byte));
                return 1;
            }
            return 1;
        }
    }

    static const char* prompt_of(EditLine* el) {
        Impl* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        return self->prompt.c_str();
    }

    bool start() {
        // Multibyte input needs a UTF-8 character type: the environment's, else C.UTF-8.
        if (const char* cur = std::setlocale(LC_CTYPE, nullptr)) old_locale = cur;
        std::setlocale(LC_CTYPE, "");
        if (MB_CUR_MAX == 1) std::setlocale(LC_CTYPE, "C.UTF-8");
        in = fdopen(dup(in_fd), "r");
        out = fdopen(dup(out_fd), "w");
        if (!in || !out) return false;
        el = el_init_fd("ridge", in, out, out, in_fd, out_fd, out_fd);
        if (!el) return false;
        hist = history_init();
        HistEvent ev;
        history(hist, &ev, H_SETSIZE, 1000);
        history(hist, &ev, H_SETUNIQUE, 1);
        el_set(el, EL_CLIENTDATA, this);
        el_set(el, EL_EDITOR, "emacs");
        el_set(el, EL_HIST, history, hist);
        el_set(el, EL_PROMPT, &Impl::prompt_of);
        el_set(el, EL_GETCFN, &Impl::read_char);
        el_set(el, EL_SIGNAL, 0);  // the caller's handlers stay; libedit restores the terminal on return
        return true;
    }

    LineRead edited(const char* p, std::string& line) {
        prompt = p;
        line.clear();
        int count = 0;
        const char* got = el_gets(el, &count);
        if (!got || count <= 0) {
            return interrupted ? LineRead::Interrupted : LineRead::End;
        }
        line.assign(got, size_t(count));
        if (!line.empty() && line.back() == '\n') line.pop_back();
        if (!line.empty()) {
            HistEvent ev;
            history(hist, &ev, H_ENTER, line.c_str());
        }
        return LineRead::Line;
    }

    ~Impl() {
        if (el) el_end(el);
        if (hist) history_end(hist);
        if (in) std::fclose(in);
        if (out) std::fclose(out);
        if (!old_locale.empty()) std::setlocale(LC_CTYPE, old_locale.c_str());
    }
#endif
};

LineEditor::LineEditor(int in_fd, int out_fd, const std::atomic<bool>& interrupted)
    : impl_(std::make_unique<Impl>(in_fd, out_fd, interrupted)) {
#if RIDGE_LIBEDIT
    if (isatty(in_fd) && !impl_->start()) impl_ = std::make_unique<Impl>(in_fd, out_fd, interrupted);
#endif
}

LineEditor::~LineEditor() = default;

bool LineEditor::editing() const {
#if RIDGE_LIBEDIT
    return impl_->el != nullptr;
#else
    return false;
#endif
}

LineRead LineEditor::read(const char* prompt, std::string& line) {
#if RIDGE_LIBEDIT
    if (impl_->el) return impl_->edited(prompt, line);
#endif
    if (isatty(impl_->in_fd)) {
        const ssize_t ignored = ::write(impl_->out_fd, prompt, std::strlen(prompt));
        (void)ignored;
    }
    return impl_->plain(line);
}

}  // namespace ridge::cli
