// tools/serve_guard: the deadline and the cap on connections still reading their request, on
// socket pairs, with the clock passed in (nothing waits); then the task queue's discovery of an
// accepted socket on a real loopback listener.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tools/serve_guard.h"

namespace ridge::serve {
namespace {

using Clock = ConnectionGuard::Clock;
using std::chrono::milliseconds;

// A connected pair: [0] the server's end (given to the guard), [1] the client's.
struct Pair {
    int fd[2] = {-1, -1};
    Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
    ~Pair() {
        for (int f : fd) ::close(f);
    }
    // What the client end reads until EOF (or nothing, at once, when the connection is still open).
    std::string client_reads() const {
        std::string got;
        char buf[512];
        for (ssize_t n; (n = ::recv(fd[1], buf, sizeof buf, MSG_DONTWAIT)) > 0;) got.append(buf, size_t(n));
        return got;
    }
    bool client_sees_eof() const {
        char c;
        return ::recv(fd[1], &c, 1, MSG_DONTWAIT) == 0;
    }
};

TEST(ConnectionGuard, ARequestNotReadByTheDeadlineGets408AndEof) {
    ConnectionGuard g(2.0, 8);
    Pair slow, quick;
    const Clock::time_point t0 = Clock::now();
    const uint64_t a = g.opened(slow.fd[0], t0), b = g.opened(quick.fd[0], t0);
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    g.request_read(b);  // its request came whole: no deadline
    EXPECT_EQ(g.sweep(t0 + milliseconds(1999)), 0);
    EXPECT_TRUE(slow.client_reads().empty());
    EXPECT_EQ(g.stats().reading, 1);
    EXPECT_EQ(g.sweep(t0 + milliseconds(2001)), 1);
    const std::string got = slow.client_reads();
    EXPECT_EQ(got.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << got;
    EXPECT_NE(got.find("\"code\":408"), std::string::npos) << got;
    EXPECT_TRUE(slow.client_sees_eof());
    EXPECT_TRUE(quick.client_reads().empty());  // untouched
    EXPECT_FALSE(quick.client_sees_eof());
    EXPECT_EQ(g.sweep(t0 + milliseconds(9000)), 0);  // cut once only
    const ConnectionGuard::Stats st = g.stats();
    EXPECT_EQ(st.open, 2);
    EXPECT_EQ(st.reading, 0);
    EXPECT_EQ(st.cut_deadline, 1);
    EXPECT_EQ(st.cut_cap, 0);
    g.closed(a), g.closed(b), g.closed(0), g.closed(12345);  // unknown ids are ignored
    EXPECT_EQ(g.stats().open, 0);
}

TEST(ConnectionGuard, AtTheCapTheOldestReaderIsCut) {
    ConnectionGuard g(60.0, 2);
    Pair p1, p2, p3, p4;
    const Clock::time_point t0 = Clock::now();
    const uint64_t id1 = g.opened(p1.fd[0], t0);
    g.opened(p2.fd[0], t0 + milliseconds(1));
    g.request_read(id1);  // read: no longer counts towards the cap
    g.opened(p3.fd[0], t0 + milliseconds(2));  // 2 reading now (p2, p3): at the cap
    EXPECT_EQ(g.stats().cut_cap, 0);
    g.opened(p4.fd[0], t0 + milliseconds(3));  // one more: p2, the oldest reader, goes
    EXPECT_EQ(p2.client_reads().rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u);
    EXPECT_TRUE(p2.client_sees_eof());
    for (const Pair* p : {&p1, &p3, &p4}) {
        EXPECT_TRUE(p->client_reads().empty());
        EXPECT_FALSE(p->client_sees_eof());
    }
    const ConnectionGuard::Stats st = g.stats();
    EXPECT_EQ(st.open, 4);
    EXPECT_EQ(st.reading, 2);
    EXPECT_EQ(st.cut_cap, 1);
}

// The guard holds a duplicate: a cut reaches its connection even after the server closed its fd
// (and the fd number went to another socket).
TEST(ConnectionGuard, ACutReachesItsConnectionAfterTheFdIsReused) {
    ConnectionGuard g(1.0, 8);
    Pair slow;
    const Clock::time_point t0 = Clock::now();
    g.opened(slow.fd[0], t0);
    const int number = slow.fd[0];
    ::close(slow.fd[0]);
    Pair other;  // likely takes the freed number
    slow.fd[0] = -1;
    EXPECT_EQ(g.sweep(t0 + milliseconds(1500)), 1);
    EXPECT_EQ(slow.client_reads().rfind("HTTP/1.1 408", 0), 0u);
    EXPECT_TRUE(other.client_reads().empty()) << "fd " << number << " reused";
    EXPECT_FALSE(other.client_sees_eof());
}

// The task queue on a real listener: the accepted socket is found and watched while its worker
// runs (current() names it there), and forgotten when the worker is done.
TEST(ConnectionGuard, TheTaskQueueWatchesEachAcceptedConnection) {
    ConnectionGuard g(60.0, 8);
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    int port = ntohs(addr.sin_port);
    std::unique_ptr<httplib::TaskQueue> queue(g.task_queue(2, &port));

    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const int accepted = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(accepted, 0);
    std::atomic<uint64_t> seen{0};
    std::atomic<bool> release{false};
    queue->enqueue([&] {  // as httplib queues a connection right after accept()
        seen = ConnectionGuard::current();
        while (!release) std::this_thread::sleep_for(milliseconds(1));
        ::close(accepted);
    });
    while (seen == 0) std::this_thread::sleep_for(milliseconds(1));
    EXPECT_EQ(g.stats().open, 1);
    EXPECT_EQ(g.stats().reading, 1);
    g.request_read(seen);
    EXPECT_EQ(g.stats().reading, 0);
    release = true;
    queue->shutdown();  // waits for the worker
    EXPECT_EQ(g.stats().open, 0);
    EXPECT_EQ(ConnectionGuard::current(), 0u);  // this thread serves no connection
    ::close(client);
    ::close(listener);
}

}  // namespace
}  // namespace ridge::serve
