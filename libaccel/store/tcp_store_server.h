#pragma once
// TcpStoreServer: the job's key-value store, speaking torch 1.13's TCPStore protocol
// (wire_protocol.h), so python3-torch and LibTorch clients use it unchanged.
//
// One thread runs one epoll loop over non-blocking sockets: no thread per client, and clients
// blocked in WAIT are parked in a per-key table and answered when the last key they need
// appears. Hostile input (unknown query types, lengths over the limit, truncated frames,
// clients vanishing mid-frame or mid-wait, readers too slow to take their replies) closes that
// one connection and nothing else.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

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
};

struct TcpStoreServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_dropped = 0;   // closed by the server for bad input or slow reading
  uint64_t requests = 0;
  uint64_t keys = 0;
  uint64_t tracked_waiters = 0;       // live connections parked on options.tracked_wait_key
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

  // A snapshot of the counters (thread-safe).
  TcpStoreServerStats stats() const;

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
