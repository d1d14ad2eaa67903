#pragma once
// TcpStoreServer: the job's key-value store, speaking every generation of torch's TCPStore
// protocol (wire_protocol.h) on one port, so python3-torch and LibTorch clients of torch 1.13
// and of every 2.x release use it unchanged, in the same job.
//
// One thread runs one epoll loop over non-blocking sockets: no thread per client, and clients
// blocked in WAIT are parked in a per-key table and answered when the last key they need
// appears (store_state.h). Each connection's generation is told from its first bytes. Hostile
// input (first bytes of no generation, unknown query codes, lengths over the limit, clients
// vanishing mid-frame or mid-wait, readers too slow to take their replies) closes that one
// connection, with one log line naming the peer and the bytes, and nothing else.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace accel::store {

struct TcpStoreServerOptions {
  std::string host = "127.0.0.1";     // the only address bound ("0.0.0.0" for all)
  int port = 0;                       // 0: a free port chosen by the kernel (see port())
  uint64_t max_value_bytes = 64ull << 20;
  uint64_t max_pending_output_bytes = 256ull << 20;  // per client; beyond it the client is dropped
  int backlog = 65535;                // capped by the kernel's somaxconn
  // A key (as stored: torch's clients prefix theirs with "/") whose parked WAITs are counted in
  // stats().tracked_waiters: who is still connected and waiting on it.
  std::string tracked_wait_key = "";
  // Where a closed connection is explained (one line, no newline). Default: stderr, prefixed
  // "accel store: ". Called from the server's thread.
  std::function<void(const std::string&)> log;
};

struct TcpStoreServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_dropped = 0;   // closed by the server for bad input or slow reading
  uint64_t requests = 0;
  uint64_t keys = 0;
  uint64_t tracked_waiters = 0;       // live connections parked on options.tracked_wait_key
  // Connections by the generation they proved to speak (wire_protocol.h). An unvalidated
  // connection counts as legacy or torch 2.1 only once it sends a query only one of them has.
  uint64_t legacy_connections = 0;     // torch 1.13–2.0
  uint64_t torch21_connections = 0;    // torch 2.1
  uint64_t validated_connections = 0;  // torch 2.2+ (VALIDATE first)
  uint64_t unvalidated_connections = 0;  // without VALIDATE, not (yet) told apart
  uint64_t protocol_errors = 0;       // connections closed for bytes of no known protocol
  uint64_t parked_waits = 0;          // WAITs parked now
  uint64_t watches = 0;               // WATCH_KEY subscriptions now
};

class TcpStoreServer {
 public:
  // Binds, listens and starts the loop thread. Raises RLIMIT_NOFILE to the hard limit.
  // Throws accel::NetworkError naming host:port when the address cannot be bound (a taken port
  // says so, and by which process when /proc tells).
  static std::unique_ptr<TcpStoreServer> start(const TcpStoreServerOptions& options);

  // Stops the loop, closes every connection and the listening socket. Idempotent.
  ~TcpStoreServer();
  void stop();

  int port() const { return port_; }
  const std::string& host() const { return options_.host; }

  // A snapshot of the counters (thread-safe; as of the loop's last pass over its events).
  TcpStoreServerStats stats() const;

  // Removes every key whose stored name starts with none of `keep` (torch's clients store user
  // keys with a leading "/"), and returns how many were removed. Blocks until the loop has done
  // it (at most `timeout`; throws accel::TimeoutError beyond). Thread-safe. The agent calls it
  // between restart attempts, so no worker of the next attempt reads a key of the last one.
  size_t clearKeysExcept(const std::vector<std::string>& keep,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

 private:
  class Loop;
  explicit TcpStoreServer(const TcpStoreServerOptions& options);

  TcpStoreServerOptions options_;
  int port_ = 0;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

// Raises this process's RLIMIT_NOFILE soft limit to its hard limit; returns the new soft limit.
uint64_t raiseFileLimit();

}  // namespace accel::store
