#include "libaccel/store/tcp_store_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "accel/error.h"
#include "libaccel/common/env_names.h"
#include "libaccel/store/tcp_connect.h"
#include "libaccel/store/wire_protocol.h"

namespace accel::store {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;

// The generation $ACCEL_STORE_PROTOCOL asks for (unset or "auto": none).
std::optional<wire::Generation> generationFromEnvironment() {
  const char* v = std::getenv(env::kStoreProtocol);
  if (!v || !*v || std::string(v) == "auto") return std::nullopt;
  if (std::string(v) == "legacy") return wire::Generation::Legacy;
  if (std::string(v) == "torch21") return wire::Generation::Torch21;
  if (std::string(v) == "validated") return wire::Generation::Validated;
  throw Error(std::string(env::kStoreProtocol) + "='" + v +
              "': expected legacy, torch21, validated or auto");
}

// torch 2.x's first query on every connection.
std::string validateFrame() {
  wire::Request q;
  q.op = Op::Validate;
  q.word = wire::kValidationMagic;
  return wire::encodeRequest(wire::Generation::Validated, q);
}

std::string seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string joinKeys(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", " : "") + keys[i];
  return out + "]";
}

// torch's client prefix for user keys.
std::string wireKey(const std::string& key) { return "/" + key; }

}  // namespace

TcpStoreClient::TcpStoreClient(TcpStoreClientOptions options)
    : options_(std::move(options)),
      generation_(options_.generation ? options_.generation : generationFromEnvironment()) {
  connect();
}

TcpStoreClient::~TcpStoreClient() { breakConnection(); }

std::string TcpStoreClient::address() const {
  const std::string& h = options_.host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
         std::to_string(options_.port);
}

void TcpStoreClient::connect() {
  const auto deadline = Clock::now() + options_.connect_timeout;
  auto backoff = std::chrono::milliseconds(10);
  std::string why = "no attempt made";
  int attempts = 0;
  while (true) {
    ++attempts;
    const auto attemptEnd = attemptDeadline(deadline);
    adopt(connectTcp(options_.host, options_.port, attemptEnd, why));
    if (fd_ >= 0 && !generation_) {
      if (probeValidated()) {
        generation_ = wire::Generation::Validated;
        return parkAgain();
      }
      // A torch 1.13-2.1 server closed the connection on the handshake: ask which of them.
      breakConnection();
      adopt(connectTcp(options_.host, options_.port, attemptDeadline(deadline), why));
      if (fd_ < 0) continue;
      if (probeTorch21()) {
        generation_ = wire::Generation::Torch21;
        return parkAgain();  // this connection stays: it is in step
      }
      breakConnection();  // 1.13 closed this one too
      generation_ = wire::Generation::Legacy;
      continue;
    }
    if (fd_ >= 0) {
      if (*generation_ == wire::Generation::Validated)
        sendAll(validateFrame(), "validate", "(handshake)");
      return parkAgain();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    // An attempt that used its whole time already waited; one refused at once backs off.
    if (Clock::now() >= attemptEnd) continue;
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  throw NetworkError("cannot connect to the store at " + address() + " within " +
                     seconds(options_.connect_timeout) + " (" + std::to_string(attempts) +
                     " attempts; last error: " + why + ")");
}

Clock::time_point TcpStoreClient::attemptDeadline(Clock::time_point deadline) const {
  if (options_.connect_attempt_timeout.count() <= 0) return deadline;
  return std::min(deadline, Clock::now() + options_.connect_attempt_timeout);
}

void TcpStoreClient::ensureConnected() {
  if (fd_ < 0) connect();  // after interrupt(): adopt() throws
}

void TcpStoreClient::breakConnection() {
  std::lock_guard lock(fd_mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TcpStoreClient::adopt(int fd) {
  std::lock_guard lock(fd_mutex_);
  if (interrupted_) {
    if (fd >= 0) ::close(fd);
    throw NetworkError("the connection to the store at " + address() +
                       " was interrupted by its owner");
  }
  fd_ = fd;
}

void TcpStoreClient::interrupt() {
  std::lock_guard lock(fd_mutex_);
  interrupted_ = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void TcpStoreClient::sendAll(const std::string& bytes, const char* what, const std::string& key) {
  // A store that stops reading (its machine gone, its loop stuck) must not hold us forever.
  timeval limit{};
  limit.tv_sec = static_cast<time_t>(options_.timeout.count() / 1000);
  limit.tv_usec = static_cast<suseconds_t>((options_.timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      breakConnection();
      throw TimeoutError(std::string(what) + " '" + key + "': the store at " + address() +
                         " took no bytes for " + seconds(options_.timeout));
    }
    if (n < 0) {
      int err = errno;
      breakConnection();
      throw NetworkError(std::string(what) + " '" + key + "' on the store at " + address() + ": " +
                         std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
}

void TcpStoreClient::recvAll(void* buf, size_t size, Clock::time_point deadline, const char* what,
                             const std::string& key) {
  char* p = static_cast<char*>(buf);
  while (size > 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      // torch 1.13's protocol cannot cancel a request: the reply may still come, so this
      // connection is out of step and is replaced on the next call.
      breakConnection();
      throw TimeoutError(std::string(what) + " '" + key + "': no reply from the store at " +
                         address());
    }
    pollfd pfd{fd_, POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    ssize_t n = ::recv(fd_, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : 0;
      breakConnection();
      throw NetworkError(
          std::string(what) + " '" + key + "': the store at " + address() +
          (err ? std::string(" failed: ") + std::strerror(err) : " closed the connection"));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

Clock::time_point TcpStoreClient::probeDeadline() const {
  return Clock::now() +
         std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(30));
}

bool TcpStoreClient::probeValidated() {
  // VALIDATE + magic, then GETNUMKEYS (7) four times: to a legacy server, bytes 1..8 are a SET's
  // key length of 0x070707073C85F7CE, an allocation that fails at once (see the header).
  std::string probe = validateFrame();
  wire::Request count;
  count.op = Op::GetNumKeys;
  for (int i = 0; i < 4; ++i) probe += wire::encodeRequest(wire::Generation::Validated, count);
  try {
    sendAll(probe, "probe", "(protocol)");
    int64_t replies[4];
    recvAll(replies, sizeof replies, probeDeadline(), "probe", "(protocol)");
    return true;
  } catch (const TimeoutError&) {
    throw;  // neither generation answers like this: say so rather than guess
  } catch (const NetworkError&) {
    return false;
  }
}

bool TcpStoreClient::probeTorch21() {
  // CANCEL_WAIT (11 in 2.1) with nothing to cancel: 2.1 answers WAIT_CANCELED; 1.13 and 2.0 have
  // no query 11 and close the connection.
  try {
    sendAll(std::string(1, '\x0b'), "probe", "(protocol)");
    uint8_t reply = 0;
    recvAll(&reply, 1, probeDeadline(), "probe", "(protocol)");
    return reply == static_cast<uint8_t>(wire::WaitResponse::WaitCanceled);
  } catch (const NetworkError&) {
    return false;
  }
}

void TcpStoreClient::cancelWait(const std::string& label) {
  wire::Request q;
  q.op = Op::CancelWait;
  send(q, "cancel the wait for", label);
  // A STOP_WAITING sent just before the cancel arrived comes first.
  uint8_t reply = 0;
  recvAll(&reply, 1, Clock::now() + options_.timeout, "cancel the wait for", label);
  if (reply == static_cast<uint8_t>(wire::WaitResponse::StopWaiting)) {
    recvAll(&reply, 1, Clock::now() + options_.timeout, "cancel the wait for", label);
  }
  if (reply != static_cast<uint8_t>(wire::WaitResponse::WaitCanceled)) {
    breakConnection();
    throw NetworkError("cancel the wait for " + label + ": the store at " + address() +
                       " answered " + std::to_string(reply) + " instead of WAIT_CANCELED");
  }
}

namespace {

// A "length" that is text ('ion: clo' from an HTTP server's headers): what it says, quoted.
std::string asTextIfPrintable(uint64_t word) {
  char bytes[sizeof word];
  std::memcpy(bytes, &word, sizeof word);
  for (char c : bytes) {
    if (c < 0x20 || c > 0x7e) return "";
  }
  return " (\"" + std::string(bytes, sizeof bytes) + "\" as text: another kind of server?)";
}

}  // namespace

std::string TcpStoreClient::recvBytes(Clock::time_point deadline, const char* what,
                                      const std::string& key) {
  uint64_t size = 0;
  recvAll(&size, sizeof size, deadline, what, key);
  if (size > (1ull << 36)) {
    breakConnection();
    throw NetworkError(std::string(what) + " '" + key + "': what listens at " + address() +
                       " is no TCPStore: it sent a value of " + std::to_string(size) + " bytes" +
                       asTextIfPrintable(size));
  }
  std::string out(static_cast<size_t>(size), '\0');
  if (size) recvAll(out.data(), out.size(), deadline, what, key);
  return out;
}

wire::Request TcpStoreClient::query(Op op, const std::vector<std::string>& keys) {
  wire::Request q;
  q.op = op;
  for (const auto& k : keys) q.keys.push_back(wireKey(k));
  return q;
}

void TcpStoreClient::send(const wire::Request& q, const char* what, const std::string& label) {
  ensureConnected();
  sendAll(wire::encodeRequest(*generation_, q), what, label);
}

int64_t TcpStoreClient::recvInt64(const char* what, const std::string& label) {
  int64_t value = 0;
  recvAll(&value, sizeof value, Clock::now() + options_.timeout, what, label);
  return value;
}

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  auto q = query(Op::Set, {key});
  q.value = value;
  send(q, "set", key);
}

std::string TcpStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  send(query(Op::Get, {key}), "get", key);
  return recvBytes(Clock::now() + options_.timeout, "get", key);
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  auto q = query(Op::Add, {key});
  q.delta = delta;
  send(q, "add", key);
  return recvInt64("add", key);
}

std::string TcpStoreClient::compareSet(const std::string& key, const std::string& expected,
                                       const std::string& desired) {
  auto q = query(Op::CompareSet, {key});
  q.value = expected;
  q.desired = desired;
  send(q, "compare_set", key);
  return recvBytes(Clock::now() + options_.timeout, "compare_set", key);
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const std::string label = joinKeys(keys);
  send(query(Op::Wait, keys), "wait for", label);
  uint8_t reply = 0;
  try {
    if (*generation_ != wire::Generation::Legacy && !readableWithin(timeout)) {
      cancelWait(label);  // the connection stays in step: the check below can use it
      throw TimeoutError("wait");
    }
    // Legacy: no cancel in the protocol; a timeout here breaks the connection.
    recvAll(&reply, 1, Clock::now() + timeout, "wait for", label);
  } catch (const TimeoutError&) {
    // Say which keys are still missing (a legacy connection is replaced: it is out of step).
    std::vector<std::string> missing;
    try {
      for (const auto& k : keys) {
        if (!check({k})) missing.push_back(k);
      }
    } catch (const Error&) {
      missing = keys;
    }
    throw TimeoutError("waited " + seconds(timeout) + " for keys " + label + " on the store at " +
                       address() + "; still missing " + joinKeys(missing) + " (" +
                       std::to_string(keys.size() - missing.size()) + "/" +
                       std::to_string(keys.size()) + " present)");
  }
}

bool TcpStoreClient::readableWithin(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fd_, POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready != 0) return true;  // data, or an error the next read reports
    if (left <= 0) return false;
  }
}

void TcpStoreClient::park(const std::vector<std::string>& keys) {
  if (!parked_.empty()) breakConnection();  // the WAIT parked before goes with its connection
  parked_ = keys;
  if (fd_ >= 0) return parkAgain();
  ensureConnected();  // (which parks them)
}

// On a new connection (the server dropped the old one's parked WAIT with it).
void TcpStoreClient::parkAgain() {
  if (parked_.empty()) return;
  sendAll(wire::encodeRequest(*generation_, query(Op::Wait, parked_)), "park a wait for",
          joinKeys(parked_));
}

int TcpStoreClient::startWait(const std::vector<std::string>& keys) {
  send(query(Op::Wait, keys), "wait for", joinKeys(keys));
  return fd_;
}

void TcpStoreClient::finishWait() {
  uint8_t reply = 0;
  recvAll(&reply, 1, Clock::now() + options_.timeout, "wait", "(asynchronous)");
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  send(query(Op::Check, keys), "check", joinKeys(keys));
  uint8_t reply = 0;
  recvAll(&reply, 1, Clock::now() + options_.timeout, "check", joinKeys(keys));
  return reply == static_cast<uint8_t>(wire::CheckResponse::Ready);
}

bool TcpStoreClient::deleteKey(const std::string& key) {
  send(query(Op::DeleteKey, {key}), "delete", key);
  return recvInt64("delete", key) > 0;
}

int64_t TcpStoreClient::numKeys() {
  send(query(Op::GetNumKeys, {}), "count keys", "*");
  return recvInt64("count keys", "*");
}

}  // namespace accel::store
