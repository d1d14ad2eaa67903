#include "launcher/store/tcp_store_server.h"

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
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "accel/error.h"
#include "launcher/store/store_state.h"
#include "libaccel/store/wire_protocol.h"

namespace accel::store {
namespace {

constexpr uint64_t kListenerTag = ~0ull;
constexpr uint64_t kWakeTag = ~0ull - 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kKeepaliveIdleSeconds = 60;
constexpr int kKeepaliveIntervalSeconds = 10;
constexpr int kKeepaliveProbes = 6;

std::string addressText(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

std::string peerText(const sockaddr_storage& peer) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (peer.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&peer);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&peer);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return addressText(host, port);
}

// No Nagle delay for replies; keepalive probes, so that a peer whose machine vanished without
// closing (power, network) is dropped within about two minutes, with its parked waits.
void configureAccepted(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = kKeepaliveIdleSeconds, interval = kKeepaliveIntervalSeconds, count = kKeepaliveProbes;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
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

// A connection: its socket, what it proved to speak, its unfinished request and its replies.
struct Connection {
  uint64_t id = 0;
  int fd = -1;
  std::string peer;                            // "host:port", for log lines
  std::optional<wire::Generation> generation;  // told from the first bytes
  bool decided = false;       // false: unvalidated, Legacy or Torch21 (wire_protocol.h)
  bool answered_any = false;  // a query was handled (for classifyUnvalidated)
  wire::Generation request_generation = wire::Generation::Legacy;  // of the request under way
  wire::RequestParser parser;
  std::string in;     // bytes read and not yet taken by the parser (a split header, or the first
  size_t in_off = 0;  // bytes of a request whose generation is not told yet)
  uint64_t held = 0;  // input held, as counted in the loop's total
  std::string out;
  size_t out_off = 0;
  bool want_write = false;
  bool closing = false;  // found unfit while replying: closed once the request under way is done

  std::string_view pending() const { return std::string_view(in).substr(in_off); }
  uint64_t inputHeld() const { return (in.size() - in_off) + parser.heldBytes(); }
};

// The server's thread: one epoll loop that dispatches each event to its handler —
// onAcceptable (listener), onTasks (work from other threads), onReadable / onWritable /
// onHangup (a connection) — and publishes the counters after each pass.
class TcpStoreServer::Loop {
 public:
  Loop(const TcpStoreServerOptions& options, int listenFd)
      : options_(options),
        listen_fd_(listenFd),
        state_([this](uint64_t conn, const std::string& bytes) { sendTo(conn, bytes); }) {
    limits_.max_value_bytes = options.max_value_bytes;
    for (const auto& o : options.observed) state_.observe(o.prefix, o.on_write);
    state_.trackWaitsUnder(options.tracked_wait_prefix);
    state_.trackPresenceUnder(options.presence_key_prefix);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0)
      throw NetworkError(std::string("TCPStore server: ") + std::strerror(errno));
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
    wake();
  }

  // Runs `task` on the loop's thread and waits for it (at most `timeout`).
  void runOnLoop(std::function<void()> task, std::chrono::milliseconds timeout) {
    auto done = std::make_shared<std::promise<void>>();
    auto finished = done->get_future();
    {
      std::lock_guard<std::mutex> lock(tasks_mutex_);
      tasks_.push_back([task = std::move(task), done] {
        task();
        done->set_value();
      });
    }
    wake();
    if (finished.wait_for(timeout) != std::future_status::ready) {
      throw TimeoutError("the store's loop did not run a task within " +
                         std::to_string(timeout.count()) + " ms");
    }
  }

  StoreState& state() { return state_; }

  TcpStoreServerStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }

  bool waiting(const std::string& key, std::chrono::milliseconds grace) const {
    std::unique_lock<std::mutex> lock(stats_mutex_);
    return stats_published_.wait_for(lock, grace, [&] { return present_.count(key) > 0; });
  }

  size_t presentCount() const {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return present_.size();
  }

  bool awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(stats_mutex_);
    return stats_published_.wait_for(lock, timeout, [&] { return present_.size() <= count; });
  }

  bool awaitStats(const std::function<bool(const TcpStoreServerStats&)>& pred,
                  std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(stats_mutex_);
    return stats_published_.wait_for(lock, timeout, [&] { return pred(stats_); });
  }

  void run() {
    std::vector<epoll_event> events(1024);
    while (!stop_.load()) {
      int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      for (int i = 0; i < n; ++i) dispatch(events[i]);
      publishStats();
    }
  }

  // Registers a connected socket (on the loop's thread).
  void addConnection(int fd, std::string peer) {
    uint64_t id = next_id_++;
    Connection& c = conns_[id];
    c.id = id;
    c.fd = fd;
    c.peer = std::move(peer);
    c.parser = wire::RequestParser(limits_);
    add(fd, id, EPOLLIN);
    ++stats_local_.connections_accepted;
  }

 private:
  void dispatch(const epoll_event& event) {
    const uint64_t tag = event.data.u64;
    if (tag == kListenerTag) return onAcceptable();
    if (tag == kWakeTag) return onTasks();
    if (!conns_.count(tag)) return;  // closed earlier in this batch
    // Read what is left first: a client may send a request and close at once.
    if ((event.events & (EPOLLERR | EPOLLHUP)) && !(event.events & EPOLLIN)) return onHangup(tag);
    if (event.events & EPOLLIN) onReadable(tag);
    if (event.events & EPOLLOUT) onWritable(tag);
  }

  void onAcceptable() {
    while (true) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or EMFILE: the client retries; RLIMIT_NOFILE was raised at start
      }
      configureAccepted(fd);
      addConnection(fd, peerText(peer));
    }
  }

  void onTasks() {
    uint64_t v;
    ssize_t ignored = ::read(wake_fd_, &v, sizeof v);
    (void)ignored;
    std::vector<std::function<void()>> tasks;
    {
      std::lock_guard<std::mutex> lock(tasks_mutex_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
  }

  void onHangup(uint64_t id) { drop(id, false); }

  void onWritable(uint64_t id) {
    auto it = conns_.find(id);
    if (it != conns_.end()) flush(it->second);
    dropClosing();
  }

  // Reads what arrived (at most kReadChunk), carries out every request it completes, and
  // holds the rest against the input limits.
  void onReadable(uint64_t id) {
    Connection& c = conns_.at(id);
    char buf[kReadChunk];
    ssize_t n;
    do {
      n = ::read(c.fd, buf, sizeof buf);
    } while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return drop(id, false);
    if (n < 0) return;
    stats_local_.bytes_received += static_cast<uint64_t>(n);
    c.in.append(buf, static_cast<size_t>(n));
    if (!processInput(id)) return;
    Connection& after = conns_.at(id);
    compactInput(after);
    account(after);
    enforceInputLimits(after);
  }

  // Handles every complete request buffered on connection `id`. False if it was closed.
  bool processInput(uint64_t id) {
    while (true) {
      auto it = conns_.find(id);
      if (it == conns_.end()) return false;
      Connection& c = it->second;
      const std::string_view pending = c.pending();
      if (!c.parser.midRequest()) {
        if (pending.empty()) return true;
        if (!beginRequest(c, pending)) return conns_.count(id) > 0;
      }
      const wire::ParseResult result = c.parser.feed(c.request_generation, pending);
      c.in_off += result.consumed;
      stats_local_.parser_bytes_examined += result.consumed;
      if (result.status == wire::ParseStatus::NeedMore) return true;
      if (result.status == wire::ParseStatus::Invalid) {
        reject(c, result.error, pending);
        return false;
      }
      c.answered_any = true;
      ++stats_local_.requests;
      state_.execute(id, c.parser.request());
      dropClosing();
    }
  }

  // Before a request's first byte is parsed: the generation it is in. False while that cannot
  // be told for lack of bytes, or when the connection was rejected.
  bool beginRequest(Connection& c, std::string_view pending) {
    if (!c.generation && !detect(c, pending)) return false;
    c.request_generation = *c.generation;
    return c.decided || classify(c, pending, c.request_generation);
  }

  // Tells the connection's generation from its first bytes. False while undecided or rejected.
  bool detect(Connection& c, std::string_view pending) {
    auto d = wire::detectGeneration(pending);
    if (d.status == wire::ParseStatus::NeedMore) return false;
    if (d.status == wire::ParseStatus::Invalid) {
      reject(c, d.error, pending);
      return false;
    }
    c.generation = d.generation;
    c.decided = d.decisive;
    ++(c.decided ? stats_local_.validated_connections : stats_local_.unvalidated_connections);
    return true;
  }

  // An unvalidated connection's next query: which generation it is in. False while undecided
  // for lack of bytes, or rejected.
  bool classify(Connection& c, std::string_view pending, wire::Generation& generation) {
    auto d = wire::classifyUnvalidated(pending, !c.answered_any);
    if (d.status == wire::ParseStatus::NeedMore) return false;
    if (d.status == wire::ParseStatus::Invalid) {
      reject(c, d.error, pending);
      return false;
    }
    generation = d.generation;
    if (d.decisive) {
      c.generation = d.generation;
      c.decided = true;
      ++(d.generation == wire::Generation::Legacy ? stats_local_.legacy_connections
                                                  : stats_local_.torch21_connections);
    }
    return true;
  }

  // Drops the bytes the parser took; gives back a large buffer once it is empty.
  static void compactInput(Connection& c) {
    if (c.in_off == 0) return;
    c.in.erase(0, c.in_off);
    c.in_off = 0;
    if (c.in.empty() && c.in.capacity() > 4 * kReadChunk) std::string().swap(c.in);
  }

  void account(Connection& c) {
    const uint64_t held = c.inputHeld();
    buffered_input_ = buffered_input_ - c.held + held;
    c.held = held;
  }

  // Closes the connection over its own limit, or the one holding the most when the total is
  // over the budget.
  void enforceInputLimits(Connection& c) {
    if (c.held > options_.max_connection_input_bytes) {
      return closeForInput(c, "its unfinished request holds " + std::to_string(c.held) +
                                  " bytes, over the limit of " +
                                  std::to_string(options_.max_connection_input_bytes) +
                                  " bytes per connection");
    }
    if (buffered_input_ <= options_.max_total_input_bytes) return;
    Connection* hog = &c;
    for (auto& [id, other] : conns_) {
      if (other.held > hog->held) hog = &other;
    }
    closeForInput(*hog, "unfinished requests hold " + std::to_string(buffered_input_) +
                            " bytes over all connections, over the budget of " +
                            std::to_string(options_.max_total_input_bytes) +
                            " bytes; this one holds the most (" + std::to_string(hog->held) +
                            " bytes)");
  }

  void closeForInput(Connection& c, const std::string& why) {
    ++stats_local_.input_limit_drops;
    log("closing the connection from " + c.peer + ": " + why);
    drop(c.id, true);
  }

  // Closes a connection that sent bytes of no protocol we know, saying so once.
  void reject(Connection& c, const std::string& why, std::string_view bytes) {
    ++stats_local_.protocol_errors;
    log("closing the connection from " + c.peer + ": " + why + " (bytes: " + wire::hexBytes(bytes) +
        ")");
    drop(c.id, true);
  }

  void drop(uint64_t id, bool forced) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
    ::close(it->second.fd);
    buffered_input_ -= it->second.held;
    conns_.erase(it);
    if (forced) ++stats_local_.connections_dropped;
    state_.disconnect(id);
  }

  void log(const std::string& line) {
    if (options_.log) return options_.log(line);
    std::string text = "accel store: " + line + "\n";
    ssize_t ignored = ::write(2, text.data(), text.size());
    (void)ignored;
  }

  void sendTo(uint64_t connId, const std::string& bytes) {
    auto it = conns_.find(connId);
    if (it == conns_.end()) return;
    Connection& c = it->second;
    if (c.closing) return;
    c.out.append(bytes);
    if (c.out.size() - c.out_off > options_.max_pending_output_bytes) {
      // A reader this slow would grow the agent without bound.
      log("closing the connection from " + c.peer + ": it has not read " +
          std::to_string(c.out.size() - c.out_off) + " bytes of replies, over the limit of " +
          std::to_string(options_.max_pending_output_bytes) + " bytes");
      return markClosing(c, true);
    }
    flush(c);
  }

  // Replies go out from inside a request, so a connection found unfit then (a slow reader, a
  // peer gone) is closed once that request is done: closing it at once would free what the
  // request is about to park for it (a BARRIER that woke its own WAIT).
  void markClosing(Connection& c, bool forced) {
    if (c.closing) return;
    c.closing = true;
    closing_.emplace_back(c.id, forced);
  }

  void dropClosing() {
    std::vector<std::pair<uint64_t, bool>> marked;
    marked.swap(closing_);
    for (auto [id, forced] : marked) drop(id, forced);
  }

  void flush(Connection& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) return markClosing(c, false);
      c.out_off += static_cast<size_t>(n);
      stats_local_.bytes_sent += static_cast<uint64_t>(n);
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

  void wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
    (void)ignored;
  }

  void add(int fd, uint64_t tag, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  void publishStats() {
    stats_local_.connections = conns_.size();
    stats_local_.buffered_input_bytes = buffered_input_;
    stats_local_.keys = state_.keyCount();
    stats_local_.parked_waits = state_.parkedWaits();
    stats_local_.parked_barriers = state_.parkedBarriers();
    stats_local_.watches = state_.watchCount();
    stats_local_.parked_entries = state_.parkedEntries();
    stats_local_.tracked_waiters = state_.trackedWaits();
    stats_local_.waits_woken = state_.wokenWaits();
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      stats_ = stats_local_;
      if (state_.presenceVersion() != present_version_) {  // rarely: a client came or went
        const auto keys = state_.presentKeys();
        present_ = std::unordered_set<std::string>(keys.begin(), keys.end());
        present_version_ = state_.presenceVersion();
      }
    }
    stats_published_.notify_all();
  }

  const TcpStoreServerOptions options_;
  wire::ParseLimits limits_;
  int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Connection> conns_;
  uint64_t buffered_input_ = 0;  // the sum of every connection's `held`
  std::vector<std::pair<uint64_t, bool>>
      closing_;  // to close after the request under way (id, forced)
  StoreState state_;
  std::mutex tasks_mutex_;
  std::vector<std::function<void()>> tasks_;
  TcpStoreServerStats stats_local_;
  mutable std::mutex stats_mutex_;
  std::unordered_set<std::string> present_;  // presence keys waited on, as last published
  uint64_t present_version_ = 0;
  mutable std::condition_variable stats_published_;
  TcpStoreServerStats stats_;
};

TcpStoreServer::TcpStoreServer(const TcpStoreServerOptions& options) : options_(options) {}

namespace {

// A listening, non-blocking socket on options.host:options.port, and the port it got.
std::pair<int, int> listenOn(const TcpStoreServerOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  if (int rc = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    throw NetworkError("TCPStore server: cannot resolve '" + options.host +
                       "': " + ::gai_strerror(rc));
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
    const std::string why = "TCPStore server: cannot listen on " +
                            addressText(options.host, options.port) + ": " +
                            std::strerror(lastErrno);
    if (lastErrno == EADDRINUSE) throw AddressInUseError(why);
    throw NetworkError(why);
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int actualPort = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return {fd, actualPort};
}

void checkLimits(const TcpStoreServerOptions& o) {
  if (o.max_connection_input_bytes < o.leastConnectionInputBytes()) {
    throw Error("TCPStore server: max_connection_input_bytes (" +
                std::to_string(o.max_connection_input_bytes) +
                ") must be at least max_value_bytes (" + std::to_string(o.max_value_bytes) +
                ") + 1 KiB, so that a SET of the longest value allowed fits");
  }
  if (o.max_total_input_bytes < o.max_connection_input_bytes) {
    throw Error("TCPStore server: max_total_input_bytes (" +
                std::to_string(o.max_total_input_bytes) +
                ") must be at least max_connection_input_bytes (" +
                std::to_string(o.max_connection_input_bytes) + ")");
  }
}

}  // namespace

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  checkLimits(options);
  raiseFileLimit();
  auto [fd, port] = listenOn(options);
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer(options));
  server->port_ = port;
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

TcpStoreServerStats TcpStoreServer::stats() const {
  return loop_ ? loop_->stats() : TcpStoreServerStats{};
}

bool TcpStoreServer::waiting(const std::string& key, std::chrono::milliseconds grace) const {
  return loop_ && loop_->waiting(key, grace);
}

size_t TcpStoreServer::presentCount() const { return loop_ ? loop_->presentCount() : 0; }

bool TcpStoreServer::awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const {
  return !loop_ || loop_->awaitPresentAtMost(count, timeout);
}

bool TcpStoreServer::awaitStats(const std::function<bool(const TcpStoreServerStats&)>& pred,
                                std::chrono::milliseconds timeout) const {
  return loop_ ? loop_->awaitStats(pred, timeout) : pred(TcpStoreServerStats{});
}

void TcpStoreServer::adoptConnection(int fd, const std::string& peer,
                                     std::chrono::milliseconds timeout) {
  if (!loop_) {
    ::close(fd);
    throw NetworkError("TCPStore server: stopped; cannot serve " + peer);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  // The task owns the descriptor until the loop takes it: after a timeout it may still run, and
  // if it never does, it closes the descriptor when it is destroyed (with the loop at the latest).
  struct OwnedFd {
    int fd = -1;
    ~OwnedFd() {
      if (fd >= 0) ::close(fd);
    }
  };
  auto owned = std::make_shared<OwnedFd>();
  owned->fd = fd;
  Loop* loop = loop_.get();
  loop_->runOnLoop([loop, owned, peer] { loop->addConnection(std::exchange(owned->fd, -1), peer); },
                   timeout);
}

size_t TcpStoreServer::clearKeysExcept(const std::vector<std::string>& keep,
                                       std::chrono::milliseconds timeout) {
  if (!loop_) return 0;
  // The task owns what it touches: after a timeout it may still run, after this call returned.
  auto removed = std::make_shared<size_t>(0);
  Loop* loop = loop_.get();
  loop_->runOnLoop([loop, keep, removed] { *removed = loop->state().clearExcept(keep); }, timeout);
  return *removed;
}

}  // namespace accel::store
