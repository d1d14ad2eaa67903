#pragma once
// TcpStoreClient: a client of the job's store — our TcpStoreServer, or torch's own TCPStore
// server of any release (1.13's, 2.x's legacy or libuv server). Keys are sent with torch's "/"
// prefix, so a key set here is the key torch.distributed.TCPStore(...).get() reads. One
// connection, blocking calls, each bounded by a timeout; not thread-safe (use one client per
// thread).
//
// The protocol generation (wire_protocol.h) comes from the options, else from
// $ACCEL_STORE_PROTOCOL (legacy | torch21 | validated | auto), else from a probe when
// connecting: the client sends torch 2.2+'s VALIDATE and four GETNUMKEYS. A 2.2+ server (either
// backend) answers four int64s. A torch 1.13-2.1 server reads those bytes as a SET whose key
// length is over 2^58 bytes, fails that allocation at once and closes the connection; the
// client then reconnects and sends a lone CANCEL_WAIT (2.1's query 11): torch 2.1 answers
// WAIT_CANCELED, 1.13/2.0 close again and the client reconnects speaking the legacy protocol.
// Nothing is stored by the probes on any of them; our own server answers the first.

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "libaccel/store/store.h"
#include "libaccel/store/wire_protocol.h"

namespace accel::store {

struct TcpStoreClientOptions {
  std::string host = "127.0.0.1";
  int port = 29500;
  // How long to keep retrying the first connection (with backoff: 10 ms doubling to 1 s).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  // How long one of those tries may wait for an answer before a fresh one (0: until
  // connect_timeout ends). A path that lost packets and came back is used within this much of
  // its return, instead of after the kernel's next SYN retry (1, 3, 7 ... s after the first).
  std::chrono::milliseconds connect_attempt_timeout{0};
  // Bound for every call that does not take its own timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // The protocol to speak; unset: $ACCEL_STORE_PROTOCOL, else a probe (see above).
  std::optional<wire::Generation> generation;
};

class TcpStoreClient : public Store {
 public:
  // Connects (retrying until connect_timeout). Throws accel::NetworkError naming host:port and
  // the last error when the store cannot be reached in time, accel::Error when
  // $ACCEL_STORE_PROTOCOL names no generation.
  // Every call below blocks at most options.timeout (get and wait: their own timeout) and
  // throws accel::TimeoutError beyond it, accel::NetworkError when the connection breaks or the
  // store answers out of protocol (e.g. when the server closed it for an input limit).
  explicit TcpStoreClient(TcpStoreClientOptions options);
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::string get(const std::string& key) { return get(key, options_.timeout); }
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;

  // An asynchronous wait, for callers with their own event loop: sends WAIT for `keys` and
  // returns the connection's descriptor, which becomes readable when every key exists or the
  // store goes away; then call finishWait(). No other call may be made in between.
  int startWait(const std::vector<std::string>& keys);
  // Reads the reply to startWait (it is there: the descriptor was readable). Throws
  // accel::NetworkError when the store closed the connection instead.
  void finishWait();
  // Parks a WAIT on `keys` that nobody answers — a presence key, which accel's store counts while
  // this connection lives (TcpStoreServerOptions::presence_key_prefix) — and goes on: any call may
  // follow on the connection (accel's store keeps the parked WAIT through their CANCEL_WAITs). A
  // reconnection parks it again; a park again replaces it (on a new connection: the server drops
  // the one before with its old one). Not for torch's stores, whose CANCEL_WAIT would end it.
  void park(const std::vector<std::string>& keys);

  // "host:port" of the store, for messages.
  std::string address() const;

  // The only calls that may come from another thread while one blocks: interrupt() shuts the
  // connection down, so the blocked call fails at once with accel::NetworkError, as does every
  // later call (no reconnection). For an owner that must not wait for an unreachable store.
  void interrupt();
  // Changes the bound of every later call that takes no timeout of its own.
  void setTimeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }
  // Changes connect_timeout and connect_attempt_timeout for every later reconnection (a call
  // after one that broke the connection makes a new one).
  void setConnectTimeouts(std::chrono::milliseconds total, std::chrono::milliseconds attempt) {
    options_.connect_timeout = total;
    options_.connect_attempt_timeout = attempt;
  }

  // The generation this client speaks (known once connected).
  wire::Generation generation() const { return *generation_; }

 private:
  // A request with `keys` in torch's "/"-prefixed form.
  static wire::Request query(wire::Op op, const std::vector<std::string>& keys);
  // How long a probe waits for its answer: the call timeout, at most 30 s.
  std::chrono::steady_clock::time_point probeDeadline() const;
  // Sends torch 2.x's handshake and four GETNUMKEYS; true if the server answered them.
  bool probeValidated();
  // On a fresh connection to a server without VALIDATE: true if it is torch 2.1's.
  bool probeTorch21();
  // Whether the connection has something to read within `timeout`.
  bool readableWithin(std::chrono::milliseconds timeout);
  // After a wait timed out: CANCEL_WAIT, so the connection stays in step (torch 2.x).
  void cancelWait(const std::string& label);
  // Connects if needed and sends `q`; `what` and `label` name it in errors.
  void send(const wire::Request& q, const char* what, const std::string& label);
  int64_t recvInt64(const char* what, const std::string& label);
  void connect();
  // When one try of connect() ends: connect_attempt_timeout from now, at most `deadline`.
  std::chrono::steady_clock::time_point attemptDeadline(
      std::chrono::steady_clock::time_point deadline) const;
  void ensureConnected();
  void sendAll(const std::string& bytes, const char* what, const std::string& key);
  void recvAll(void* buf, size_t size, std::chrono::steady_clock::time_point deadline,
               const char* what, const std::string& key);
  std::string recvBytes(std::chrono::steady_clock::time_point deadline, const char* what,
                        const std::string& key);
  void breakConnection();
  // Makes `fd` (or -1) the connection, unless interrupted (then closes it and throws).
  void adopt(int fd);
  void parkAgain();

  TcpStoreClientOptions options_;
  std::optional<wire::Generation> generation_;
  int fd_ = -1;
  std::mutex fd_mutex_;  // fd_ against interrupt() from another thread
  bool interrupted_ = false;
  std::vector<std::string> parked_;  // park()'s keys, parked again on every new connection
};

}  // namespace accel::store
