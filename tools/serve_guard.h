// What a connection to `ridge serve` may hold before its request has been read.
//
// Debian's cpp-httplib 0.11.4 gives every connection a worker thread and times out each recv on
// its own, so a client that sends its headers a byte a second holds a worker forever, and as many
// such clients as there are workers hold the server. The guard bounds that from outside httplib:
// - a deadline: a connection whose request (headers and body) has not been read read_deadline_s
//   seconds after it was accepted is answered 408 and shut down, which ends its worker's read;
// - a cap: at most max_reading connections may be reading their request at once; one more cuts
//   the oldest reader (503). A request sent whole is read within a moment of its accept, so the
//   oldest reader is the likeliest to be slow, and a cap below the worker count keeps workers for
//   requests that arrive whole however many slow clients connect.
// A connection leaves the guard's watch once its request has been read (request_read) and is
// forgotten when its worker is done with it (closed). The guard holds a duplicate of each socket,
// so a cut always reaches the connection it means, even when the worker has closed its own fd.
#pragma once
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace ridge::serve {

class ConnectionGuard {
public:
    using Clock = std::chrono::steady_clock;

    // read_deadline_s > 0; max_reading >= 1.
    ConnectionGuard(double read_deadline_s, int max_reading);
    ~ConnectionGuard();  // stops the watchdog; closes the duplicates it still holds
    ConnectionGuard(const ConnectionGuard&) = delete;
    ConnectionGuard& operator=(const ConnectionGuard&) = delete;

    // A connection accepted on socket fd at `now`: watched from here (the guard dups fd). Cuts the
    // oldest reader when max_reading are already reading. Returns its id; 0 if fd cannot be dup'ed.
    uint64_t opened(int fd, Clock::time_point now = Clock::now());
    // Its request has been read whole: no deadline from here (an answer may take minutes).
    void request_read(uint64_t id);
    // Its worker is done with it: forgotten, the duplicate closed. Unknown ids (0) are ignored.
    void closed(uint64_t id);
    // Cuts every connection still reading at `now` whose deadline has passed; how many it cut.
    int sweep(Clock::time_point now = Clock::now());
    // A thread that sweeps every 100 ms until the guard is destroyed.
    void start_watchdog();

    struct Stats {
        int64_t open = 0;          // connections accepted and not yet closed
        int64_t reading = 0;       // of them, still reading their request and not cut
        int64_t cut_deadline = 0;  // cut since the start: past the deadline
        int64_t cut_cap = 0;       // cut since the start: the oldest reader, at the cap
    };
    Stats stats() const;

    // httplib's task queue for the server: `threads` workers (httplib::ThreadPool), and before each
    // accepted connection is queued, the guard is told of its socket (the one socket open on
    // *listen_port, not listening, that the guard does not know yet) and the worker that serves it
    // can name it with current(). listen_port is read when a connection arrives (bound by then).
    httplib::TaskQueue* task_queue(size_t threads, const int* listen_port);
    // The connection the calling worker thread is serving; 0 outside a worker.
    static uint64_t current();

private:
    struct Conn {
        int dup_fd = -1;
        uint64_t inode = 0;
        Clock::time_point opened;
        bool reading = true;
    };
    void cut(Conn& c, int status, const char* why);  // lock held
    uint64_t adopt_new_socket(int listen_port);       // the task queue's discovery

    const Clock::duration deadline_;
    const int max_reading_;
    mutable std::mutex mu_;
    std::map<uint64_t, Conn> conns_;  // by id, in order of acceptance
    uint64_t next_id_ = 1;
    Stats stats_;
    std::thread watchdog_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;

    friend class GuardedTaskQueue;
};

}  // namespace ridge::serve
