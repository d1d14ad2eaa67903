// libFuzzer target for the store's whole loop, not only its frame parser: each input is a script
// of connections opening, sending bytes (raw or well-formed frames of any generation), reading,
// half-closing and closing, run against a real TcpStoreServer whose connections are socketpairs
// (adoptConnection). The server runs with small limits so the input limits, the slow-reader
// limit and the global budget are all reachable. After every step that asks, and at the end:
//  - the published counters are consistent (parked waits, barriers and watches never exceed
//    the requests made; the input held stays within the budget; the parser examined no more
//    bytes than were received);
//  - once every connection is closed, nothing stays parked, indexed or buffered;
//  - a fresh client is still answered.
// A violation aborts (a crash to libFuzzer). The corpus (corpus/store_loop) holds scripts for
// the cases issue 12 names; store_loop_replay runs them under the main build's compiler.
//
// Script: a stream of steps; a step's first byte b is the kind (b % 8) and a connection number
// (b / 8, modulo the connections open); bytes after it are the step's arguments.
//   0 open a connection (at most kMaxConnections at once)
//   1 send: the next byte n, then n raw bytes of the script
//   2 send a frame: the next byte picks the generation (% 3) and the query, the one after
//     picks its key among kKeys (VALIDATE first when the generation is validated)
//   3 half-close (shutdown SHUT_WR)   4 close   5 read what replies are there
//   6 wait until the server has let go of every connection the script closed and has taken
//     everything sent on the others (or closed them), then check the counters
//   7 check the counters

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/wire_protocol.h"

namespace {

using accel::store::TcpStoreServer;
using accel::store::TcpStoreServerOptions;
using accel::store::TcpStoreServerStats;
namespace wire = accel::store::wire;
using namespace std::chrono_literals;

constexpr size_t kMaxConnections = 8;
const char* const kKeys[] = {"/k0", "/k1", "/k2", "init/"};
constexpr auto kPatience = 10s;  // a healthy loop answers in microseconds

[[noreturn]] void fail(const char* what, const TcpStoreServerStats& s) {
  std::fprintf(
      stderr,
      "store_loop_fuzzer: %s (connections %llu, dropped %llu, requests %llu, parked waits %llu, "
      "barriers %llu, watches %llu, entries %llu, buffered %llu, received %llu, examined %llu)\n",
      what, (unsigned long long)s.connections, (unsigned long long)s.connections_dropped,
      (unsigned long long)s.requests, (unsigned long long)s.parked_waits,
      (unsigned long long)s.parked_barriers, (unsigned long long)s.watches,
      (unsigned long long)s.parked_entries, (unsigned long long)s.buffered_input_bytes,
      (unsigned long long)s.bytes_received, (unsigned long long)s.parser_bytes_examined);
  std::abort();
}

// Reads exactly `size` bytes within kPatience, through signals (EINTR); "" when it did, else what
// happened instead (for the failure message).
std::string readReply(int fd, char* out, size_t size) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  size_t have = 0;
  while (have < size) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return "no reply within " + std::to_string(kPatience.count()) + " s, " +
             std::to_string(have) + " bytes";
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return std::string("poll: ") + std::strerror(errno);
    if (ready == 0) continue;
    const ssize_t n = ::recv(fd, out + have, size - have, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return std::string("recv: ") + std::strerror(errno);
    if (n == 0)
      return "closed by the server after " + std::to_string(have) + " bytes (revents " +
             std::to_string(p.revents) + ")";
    have += static_cast<size_t>(n);
  }
  return "";
}

TcpStoreServerOptions smallLimits() {
  TcpStoreServerOptions o;
  o.max_value_bytes = 2048;
  o.max_connection_input_bytes = 4096;
  o.max_total_input_bytes = 12288;
  o.max_pending_output_bytes = 16384;
  o.tracked_wait_prefix = "/k0";
  o.log = [](const std::string&) {};
  return o;
}

void checkCounters(const TcpStoreServerStats& s, const TcpStoreServerOptions& o) {
  if (s.connections > s.connections_accepted) fail("more connections open than accepted", s);
  if (s.parked_waits > s.requests) fail("more parked WAITs than requests", s);
  if (s.parked_barriers > s.requests) fail("more parked BARRIERs than requests", s);
  if (s.watches > s.requests) fail("more watches than requests", s);
  if (s.tracked_waiters > s.parked_waits) fail("more tracked waiters than parked WAITs", s);
  if (s.buffered_input_bytes > o.max_total_input_bytes)
    fail("input held over the global budget", s);
  if (s.parser_bytes_examined > s.bytes_received)
    fail("the parser examined more bytes than arrived", s);
  if (s.connections == 0 && (s.parked_waits || s.parked_barriers || s.watches || s.parked_entries ||
                             s.buffered_input_bytes)) {
    fail("something is left parked or buffered with no connection open", s);
  }
}

// A frame of the generation and query `pick` names, on key `key` (empty when that generation
// lacks the query).
std::string frame(uint8_t pick, uint8_t key) {
  static const wire::Op kOps[] = {wire::Op::Set,       wire::Op::Get,        wire::Op::Add,
                                  wire::Op::Check,     wire::Op::Wait,       wire::Op::WatchKey,
                                  wire::Op::DeleteKey, wire::Op::CancelWait, wire::Op::MultiGet,
                                  wire::Op::MultiSet,  wire::Op::Append,     wire::Op::QueuePush,
                                  wire::Op::QueuePop,  wire::Op::Barrier,    wire::Op::Ping,
                                  wire::Op::ListKeys,  wire::Op::CompareSet, wire::Op::GetNumKeys};
  const auto g = static_cast<wire::Generation>(pick % 3);
  wire::Request q;
  q.op = kOps[(pick / 3) % (sizeof kOps / sizeof kOps[0])];
  q.keys = {kKeys[key % 4]};
  q.values = {"v"};
  q.value = "v";
  q.delta = 2;  // ADD's delta, BARRIER's world size
  if (!wire::codeOf(g, q.op)) return "";
  std::string out;
  if (g == wire::Generation::Validated) {
    wire::Request v;
    v.op = wire::Op::Validate;
    v.word = wire::kValidationMagic;
    out = wire::encodeRequest(g, v);
  }
  return out + wire::encodeRequest(g, q);
}

// The script's end of a connection, and what was sent on it.
struct Client {
  int fd = -1;
  uint64_t sent = 0;

  // The server closed its end (bad input, a limit, a slow reader, a peer it saw go).
  bool serverClosed() const {
    pollfd p{fd, 0, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
  }
  // Bytes sent here that the server has neither read nor discarded by closing its end (the
  // socket's send queue: a socketpair's is freed as the peer reads it, or when it closes).
  int unread() const {
    int queued = 0;
    return ::ioctl(fd, SIOCOUTQ, &queued) == 0 ? queued : -1;
  }
};

class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  void run() {
    server_ = TcpStoreServer::start(options_);
    while (pos_ < size_) step(data_[pos_++]);
    for (const Client& c : clients_) ::close(c.fd);
    clients_.clear();
    TcpStoreServerStats s;
    if (!server_->awaitStats([](const TcpStoreServerStats& st) { return st.connections == 0; },
                             kPatience)) {
      fail("connections still open after every client closed", server_->stats());
    }
    s = server_->stats();
    checkCounters(s, options_);
    freshClientIsAnswered();
  }

 private:
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }

  void step(uint8_t b) {
    const int kind = b % 8;
    if (kind == 0) return open();
    if (kind == 7) return checkCounters(server_->stats(), options_);
    if (kind == 6) return settle();
    if (clients_.empty()) return;
    const size_t i = (b / 8) % clients_.size();
    if (kind == 1) {
      const size_t n = std::min<size_t>(next(), size_ - pos_);
      send(i, std::string(reinterpret_cast<const char*>(data_ + pos_), n));
      pos_ += n;
    } else if (kind == 2) {
      const uint8_t pick = next();
      send(i, frame(pick, next()));
    } else if (kind == 3) {
      ::shutdown(clients_[i].fd, SHUT_WR);
    } else if (kind == 4) {
      ::close(clients_[i].fd);
      clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      drain(clients_[i].fd);
    }
  }

  void open() {
    if (clients_.size() >= kMaxConnections) return;
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) std::abort();
    server_->adoptConnection(pair[1], "fuzz:" + std::to_string(opened_++));
    clients_.push_back(Client{pair[0], 0});
  }

  void send(size_t i, const std::string& bytes) {
    // Never blocks: a server that stopped reading us (it closed us, or we are a slow reader
    // it is about to close) just loses the rest.
    ssize_t n = ::send(clients_[i].fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) clients_[i].sent += static_cast<uint64_t>(n);
  }

  static void drain(int fd) {
    char buf[4096];
    while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
  }

  // Until the loop is done with what the script did so far, then checks: it has let go of every
  // connection the script closed, and on each connection both ends still hold, it has read
  // every byte sent (its published bytes_received counts at least those). What the server owes a
  // connection closed by either end is nothing: once its client is gone, a reply it cannot
  // deliver closes it (EPIPE), unread requests and all, however fast the loop is; and one it
  // closed (bad input, a limit) it stops reading. A fast loop reads each request before the
  // script closes, a loaded one after, so counting those bytes would fail only under load.
  void settle() {
    const auto done = [this](const TcpStoreServerStats& s) {
      uint64_t served = 0, owed = 0;
      for (const Client& c : clients_) {
        if (c.unread() != 0) return false;
        if (c.serverClosed()) continue;
        ++served;
        owed += c.sent;
      }
      return s.connections == served && s.bytes_received >= owed;
    };
    if (!server_->awaitStats(done, kPatience)) {
      fail("the loop stopped reading, or kept a connection its client closed", server_->stats());
    }
    checkCounters(server_->stats(), options_);
  }

  void freshClientIsAnswered() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) std::abort();
    server_->adoptConnection(pair[1], "fuzz:fresh");
    wire::Request v;
    v.op = wire::Op::Validate;
    v.word = wire::kValidationMagic;
    wire::Request ping;
    ping.op = wire::Op::Ping;
    ping.word = 0x5EED5EED;
    const std::string bytes = wire::encodeRequest(wire::Generation::Validated, v) +
                              wire::encodeRequest(wire::Generation::Validated, ping);
    if (::send(pair[0], bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size()))
      std::abort();
    uint32_t echoed = 0;
    const std::string got = readReply(pair[0], reinterpret_cast<char*>(&echoed), sizeof echoed);
    if (!got.empty() || echoed != ping.word) {
      const std::string why =
          "a fresh client was not answered: " + (got.empty() ? "wrong nonce" : got);
      fail(why.c_str(), server_->stats());
    }
    ::close(pair[0]);
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const TcpStoreServerOptions options_ = smallLimits();
  std::unique_ptr<TcpStoreServer> server_;
  std::vector<Client> clients_;
  uint64_t opened_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Script(data, size).run();
  return 0;
}
