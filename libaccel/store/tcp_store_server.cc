#include "libaccel/store/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "libaccel/common/error.h"
#include "libaccel/store/wire_protocol.h"

namespace accel::store {
namespace {

using wire::QueryType;

constexpr uint64_t kListenerTag = ~0ull;
constexpr uint64_t kWakeTag = ~0ull - 1;
constexpr size_t kReadChunk = 64 * 1024;

std::string addressText(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

uint64_t raiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

class TcpStoreServer::Loop {
 public:
  Loop(const TcpStoreServerOptions& options, int listenFd) : options_(options), listen_fd_(listenFd) {
    limits_.max_value_bytes = options.max_value_bytes;
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) throw NetworkError(std::string("TCPStore server: ") + std::strerror(errno));
    add(listen_fd_, kListenerTag, EPOLLIN);
    add(wake_fd_, kWakeTag, EPOLLIN);
  }

  ~Loop() {
    for (auto& [id, conn] : conns_) ::close(conn.fd);
    ::close(listen_fd_);
    ::close(epoll_fd_);
    ::close(wake_fd_);
  }

  void requestStop() {
    stop_.store(true);
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
    (void)ignored;
  }

  TcpStoreServerStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }

  void run() {
    std::vector<epoll_event> events(1024);
    while (!stop_.load()) {
      int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      for (int i = 0; i < n; ++i) {
        uint64_t tag = events[i].data.u64;
        if (tag == kListenerTag) {
          acceptAll();
        } else if (tag == kWakeTag) {
          uint64_t v;
          ssize_t ignored = ::read(wake_fd_, &v, sizeof v);
          (void)ignored;
        } else {
          auto it = conns_.find(tag);
          if (it == conns_.end()) continue;  // closed earlier in this batch
          if (events[i].events & (EPOLLERR | EPOLLHUP)) {
            // Read what is left first: a client may send a request and close at once.
            if (!(events[i].events & EPOLLIN)) {
              drop(tag, false);
              continue;
            }
          }
          if (events[i].events & EPOLLIN) onReadable(tag);
          auto again = conns_.find(tag);
          if (again != conns_.end() && (events[i].events & EPOLLOUT)) flush(again->second);
        }
      }
      publishStats();
    }
  }

 private:
  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string in;
    size_t in_off = 0;
    std::string out;
    size_t out_off = 0;
    bool want_write = false;
  };
  struct Waiter {
    uint64_t conn = 0;
    size_t missing = 0;
  };

  void add(int fd, uint64_t tag, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  void acceptAll() {
    while (true) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or EMFILE: the client retries; RLIMIT_NOFILE was raised at start
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      uint64_t id = next_id_++;
      Conn& c = conns_[id];
      c.id = id;
      c.fd = fd;
      add(fd, id, EPOLLIN);
      ++stats_local_.connections_accepted;
    }
  }

  void drop(uint64_t id, bool forced) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
    ::close(it->second.fd);
    conns_.erase(it);
    if (forced) ++stats_local_.connections_dropped;
    // Its parked waits and watches are discarded lazily (their connection id no longer exists).
  }

  void onReadable(uint64_t id) {
    Conn* c = &conns_.at(id);
    char buf[kReadChunk];
    ssize_t n;
    do {
      n = ::read(c->fd, buf, sizeof buf);
    } while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
      drop(id, false);
      return;
    }
    if (n < 0) return;
    c->in.append(buf, static_cast<size_t>(n));
    while (true) {
      wire::Request request;
      std::string_view pending(c->in.data() + c->in_off, c->in.size() - c->in_off);
      auto result = wire::parseRequest(pending, limits_, request);
      if (result.status == wire::ParseStatus::NeedMore) break;
      if (result.status == wire::ParseStatus::Invalid) {
        drop(id, true);
        return;
      }
      c->in_off += result.consumed;
      ++stats_local_.requests;
      handle(*c, request);
      auto again = conns_.find(id);
      if (again == conns_.end()) return;
      c = &again->second;
    }
    if (c->in_off > 0 && (c->in_off == c->in.size() || c->in_off > (1u << 20))) {
      c->in.erase(0, c->in_off);
      c->in_off = 0;
    }
  }

  void send(Conn& c, const std::string& bytes) {
    c.out.append(bytes);
    if (c.out.size() - c.out_off > options_.max_pending_output_bytes) {
      drop(c.id, true);  // a reader this slow would grow the agent without bound
      return;
    }
    flush(c);
  }

  void sendTo(uint64_t connId, const std::string& bytes) {
    auto it = conns_.find(connId);
    if (it != conns_.end()) send(it->second, bytes);
  }

  void flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) {
        drop(c.id, false);
        return;
      }
      c.out_off += static_cast<size_t>(n);
    }
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    bool want = !c.out.empty();
    if (want != c.want_write) {
      epoll_event ev{};
      ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
      ev.data.u64 = c.id;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
      c.want_write = want;
    }
  }

  // A key appeared: answer the waiters it completes.
  void keyCreated(const std::string& key) {
    auto it = waiting_.find(key);
    if (it == waiting_.end()) return;
    std::vector<uint64_t> ids = std::move(it->second);
    waiting_.erase(it);
    for (uint64_t w : ids) {
      auto waiter = waiters_.find(w);
      if (waiter == waiters_.end()) continue;
      if (--waiter->second.missing == 0) {
        uint64_t conn = waiter->second.conn;
        waiters_.erase(waiter);
        std::string reply;
        wire::putByte(reply, static_cast<uint8_t>(wire::WaitResponse::StopWaiting));
        sendTo(conn, reply);
      }
    }
  }

  void notifyWatchers(const std::string& key, wire::WatchResponse event, const std::string& oldValue,
                      const std::string& newValue) {
    auto it = watchers_.find(key);
    if (it == watchers_.end()) return;
    std::string message;
    wire::putByte(message, static_cast<uint8_t>(event));
    wire::putBytes(message, key);
    wire::putBytes(message, oldValue);
    wire::putBytes(message, newValue);
    std::vector<uint64_t> alive;
    for (uint64_t conn : it->second) {
      if (conns_.count(conn)) {
        alive.push_back(conn);
        sendTo(conn, message);
      }
    }
    it->second = std::move(alive);
  }

  // Stores `value` under `key`, waking waiters and watchers.
  void store(const std::string& key, std::string value) {
    auto it = data_.find(key);
    if (it == data_.end()) {
      data_.emplace(key, value);
      notifyWatchers(key, wire::WatchResponse::KeyCreated, "", value);
      keyCreated(key);
    } else {
      std::string old = std::move(it->second);
      it->second = value;
      notifyWatchers(key, wire::WatchResponse::KeyUpdated, old, value);
    }
  }

  void handle(Conn& c, const wire::Request& q) {
    const uint64_t id = c.id;
    std::string reply;
    switch (q.type) {
      case QueryType::Set:
        store(q.keys[0], q.value);
        return;
      case QueryType::CompareSet: {
        // torch 1.13's semantics, including its answer for a missing key with a non-empty
        // expected value (it returns the expected value and stores nothing).
        auto it = data_.find(q.keys[0]);
        if (it == data_.end()) {
          if (q.value.empty()) {
            store(q.keys[0], q.desired);
            wire::putBytes(reply, q.desired);
          } else {
            wire::putBytes(reply, q.value);
          }
        } else {
          if (it->second == q.value) store(q.keys[0], q.desired);
          wire::putBytes(reply, data_.at(q.keys[0]));
        }
        break;
      }
      case QueryType::Get: {
        auto it = data_.find(q.keys[0]);
        wire::putBytes(reply, it == data_.end() ? std::string() : it->second);
        break;
      }
      case QueryType::Add: {
        int64_t value = q.delta;
        auto it = data_.find(q.keys[0]);
        if (it != data_.end()) {
          errno = 0;
          char* end = nullptr;
          long long current = std::strtoll(it->second.c_str(), &end, 10);
          if (!it->second.empty() && *end == '\0' && errno == 0) value = static_cast<int64_t>(current) + q.delta;
        }
        store(q.keys[0], std::to_string(value));
        wire::putInt64(reply, value);
        break;
      }
      case QueryType::Check: {
        bool all = true;
        for (const auto& k : q.keys) all = all && data_.count(k);
        wire::putByte(reply, static_cast<uint8_t>(all ? wire::CheckResponse::Ready : wire::CheckResponse::NotReady));
        break;
      }
      case QueryType::Wait: {
        std::unordered_set<std::string> missing;
        for (const auto& k : q.keys) {
          if (!data_.count(k)) missing.insert(k);
        }
        if (missing.empty()) {
          wire::putByte(reply, static_cast<uint8_t>(wire::WaitResponse::StopWaiting));
          break;
        }
        uint64_t w = next_waiter_++;
        waiters_[w] = Waiter{id, missing.size()};
        for (const auto& k : missing) waiting_[k].push_back(w);
        return;  // parked: answered by keyCreated
      }
      case QueryType::GetNumKeys:
        wire::putInt64(reply, static_cast<int64_t>(data_.size()));
        break;
      case QueryType::WatchKey:
        watchers_[q.keys[0]].push_back(id);
        wire::putByte(reply, static_cast<uint8_t>(wire::WatchResponse::KeyCallbackResponse));
        break;
      case QueryType::DeleteKey: {
        auto it = data_.find(q.keys[0]);
        int64_t deleted = 0;
        if (it != data_.end()) {
          std::string old = std::move(it->second);
          data_.erase(it);
          deleted = 1;
          notifyWatchers(q.keys[0], wire::WatchResponse::KeyDeleted, old, "");
        }
        wire::putInt64(reply, deleted);
        break;
      }
    }
    sendTo(id, reply);
  }

  void publishStats() {
    stats_local_.keys = data_.size();
    if (!options_.tracked_wait_key.empty()) {
      uint64_t live = 0;
      if (auto it = waiting_.find(options_.tracked_wait_key); it != waiting_.end()) {
        for (uint64_t w : it->second) {
          auto waiter = waiters_.find(w);
          if (waiter != waiters_.end() && conns_.count(waiter->second.conn)) ++live;
        }
      }
      stats_local_.tracked_waiters = live;
    }
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_ = stats_local_;
  }

  const TcpStoreServerOptions options_;
  wire::ParseLimits limits_;
  int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  uint64_t next_id_ = 1;
  uint64_t next_waiter_ = 1;
  std::unordered_map<uint64_t, Conn> conns_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<uint64_t, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiting_;   // key → waiter ids
  std::unordered_map<std::string, std::vector<uint64_t>> watchers_;  // key → connection ids
  TcpStoreServerStats stats_local_;
  mutable std::mutex stats_mutex_;
  TcpStoreServerStats stats_;
};

TcpStoreServer::TcpStoreServer(const TcpStoreServerOptions& options) : options_(options) {}

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  raiseFileLimit();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  if (int rc = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    throw NetworkError("TCPStore server: cannot resolve '" + options.host + "': " + ::gai_strerror(rc));
  }
  int fd = -1;
  int lastErrno = 0;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      lastErrno = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, options.backlog) == 0) break;
    lastErrno = errno;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    throw NetworkError("TCPStore server: cannot listen on " + addressText(options.host, options.port) + ": " +
                       std::strerror(lastErrno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int actualPort = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer(options));
  server->port_ = actualPort;
  server->loop_ = std::make_unique<Loop>(options, fd);
  server->thread_ = std::thread([loop = server->loop_.get()] {
    // Signals are the embedding process's business (the agent reads them from a signalfd,
    // which needs every thread to block them).
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    loop->run();
  });
  return server;
}

void TcpStoreServer::stop() {
  if (!loop_) return;
  loop_->requestStop();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

TcpStoreServer::~TcpStoreServer() { stop(); }

TcpStoreServerStats TcpStoreServer::stats() const { return loop_ ? loop_->stats() : TcpStoreServerStats{}; }

}  // namespace accel::store
