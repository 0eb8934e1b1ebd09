// serve_guard.h: the deadline and the cap on connections still reading their request.
#include "tools/serve_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace ridge::serve {

namespace {

thread_local uint64_t t_current = 0;

// The socket inode an entry of /proc/self/fd links to ("socket:[N]"), 0 for anything else.
uint64_t socket_inode(int fd) {
    char link[64], path[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(path, link, sizeof link - 1);
    if (n <= 0) return 0;
    link[n] = '\0';
    unsigned long long inode = 0;
    return std::sscanf(link, "socket:[%llu]", &inode) == 1 ? uint64_t(inode) : 0;
}

// The local TCP port of a socket that is not listening; -1 for a listening one or any other kind.
int accepted_port(int fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening) return -1;
    sockaddr_storage addr{};
    len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
    if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
    if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
    return -1;
}

}  // namespace

ConnectionGuard::ConnectionGuard(double read_deadline_s, int max_reading)
    : deadline_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(read_deadline_s))),
      max_reading_(max_reading < 1 ? 1 : max_reading) {}

ConnectionGuard::~ConnectionGuard() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    stop_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    for (auto& [id, c] : conns_) ::close(c.dup_fd);
}

uint64_t ConnectionGuard::opened(int fd, Clock::time_point now) {
    const int dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    // At the cap, the oldest reader goes (the map is in order of acceptance).
    int reading = 0;
    for (auto& [id, c] : conns_) reading += c.reading ? 1 : 0;
    for (auto it = conns_.begin(); reading >= max_reading_ && it != conns_.end(); ++it)
        if (it->second.reading) {
            cut(it->second, 503, "too many connections are still sending their requests");
            stats_.cut_cap++;
            reading--;
        }
    const uint64_t id = next_id_++;
    Conn c;
    c.dup_fd = dup_fd;
    c.inode = socket_inode(fd);
    c.opened = now;
    conns_.emplace(id, c);
    stats_.open++;
    stats_.reading++;
    return id;
}

void ConnectionGuard::request_read(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = conns_.find(id);
    if (it == conns_.end() || !it->second.reading) return;
    it->second.reading = false;
    stats_.reading--;
}

void ConnectionGuard::closed(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = conns_.find(id);
    if (it == conns_.end()) return;
    if (it->second.reading) stats_.reading--;
    ::close(it->second.dup_fd);
    conns_.erase(it);
    stats_.open--;
}

int ConnectionGuard::sweep(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (auto& [id, c] : conns_)
        if (c.reading && now - c.opened > deadline_) {
            cut(c, 408, "the request was not received in time");
            stats_.cut_deadline++;
            n++;
        }
    return n;
}

// An answer the client can read if it is listening, sent without waiting (a client that reads
// nothing gets none), then both directions shut: the worker's read returns at once and it closes
// the connection. The connection is no longer reading (it will not be cut twice).
void ConnectionGuard::cut(Conn& c, int status, const char* why) {
    const std::string body = std::string("{\"error\":{\"message\":\"") + why + "\",\"type\":\"invalid_request_error\"," +
                             "\"code\":" + std::to_string(status) + "}}";
    const std::string answer = "HTTP/1.1 " + std::to_string(status) +
                               (status == 408 ? " Request Timeout" : " Service Unavailable") +
                               "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nConnection: close\r\n\r\n" + body;
    (void)!::send(c.dup_fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(c.dup_fd, SHUT_RDWR);
    c.reading = false;
    stats_.reading--;
}

void ConnectionGuard::start_watchdog() {
    watchdog_ = std::thread([this] {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_; })) {
            lock.unlock();
            sweep();
            lock.lock();
        }
    });
}

ConnectionGuard::Stats ConnectionGuard::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

uint64_t ConnectionGuard::current() { return t_current; }

// Called on httplib's listening thread right after accept(), before the connection is queued: the
// accepted socket is the one open socket on the port the guard does not know yet.
uint64_t ConnectionGuard::adopt_new_socket(int listen_port) {
    std::set<uint64_t> known;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [id, c] : conns_) known.insert(c.inode);
    }
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return 0;
    std::vector<int> fds;
    for (dirent* e; (e = ::readdir(dir)) != nullptr;)
        if (e->d_name[0] != '.') fds.push_back(std::atoi(e->d_name));
    ::closedir(dir);
    uint64_t id = 0;
    for (int fd : fds) {
        const uint64_t inode = socket_inode(fd);
        if (inode == 0 || known.count(inode) != 0 || accepted_port(fd) != listen_port) continue;
        id = opened(fd);  // one per accept; should there be more, each is watched
        known.insert(inode);
    }
    return id;
}

// httplib::ThreadPool, with the guard told of each connection before it is queued, and the id
// set on the worker while it serves the connection.
class GuardedTaskQueue final : public httplib::TaskQueue {
public:
    GuardedTaskQueue(ConnectionGuard& guard, size_t threads, const int* listen_port)
        : guard_(guard), pool_(threads), listen_port_(listen_port) {}
    void enqueue(std::function<void()> fn) override {
        const uint64_t id = guard_.adopt_new_socket(*listen_port_);
        pool_.enqueue([this, id, fn = std::move(fn)] {
            t_current = id;
            fn();
            t_current = 0;
            guard_.closed(id);
        });
    }
    void shutdown() override { pool_.shutdown(); }

private:
    ConnectionGuard& guard_;
    httplib::ThreadPool pool_;
    const int* listen_port_;
};

httplib::TaskQueue* ConnectionGuard::task_queue(size_t threads, const int* listen_port) {
    return new GuardedTaskQueue(*this, threads, listen_port);
}

}  // namespace ridge::serve
