#pragma once
// StoreHost: what the host of a store knows that no client call says (which agents are present,
// how many failure watches are parked) and does between rounds (clear the workers' keys). Every
// agent that hosts a store has one: the master on c10d, every agent on etcd (a round's machine 0
// serves the workers), the one machine of a solo job. TcpStoreHost is the agent's TcpStoreServer;
// the tests simulate one (tests/launcher/rendezvous/sim_group_store.h).
//
// Keys are given as the agents write them (round/keys.h); the TCP host translates them to what
// its server holds.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "launcher/store/tcp_store_server.h"

namespace accel::launcher {

// The master's view of the store it hosts. Thread-safe: the link's thread asks waiting() while
// the main thread uses the rest.
class StoreHost {
 public:
  virtual ~StoreHost() = default;
  // Whether an agent's presence wait is parked on `presenceKey` (its connection lives); when
  // not, waits up to `grace` for one (a wait sent just before a request on another connection
  // may be seen a moment later).
  virtual bool waiting(const std::string& presenceKey, std::chrono::milliseconds grace) const = 0;
  // How many presence waits are parked now.
  virtual size_t presentCount() const = 0;
  // Blocks until at most `count` presence waits are parked (at most `timeout`); whether so.
  virtual bool awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const = 0;
  // Blocks until at least `count` failure watches (waits on a round's stop key) are parked (at
  // most `timeout`); whether so.
  virtual bool awaitWatches(size_t count, std::chrono::milliseconds timeout) const = 0;
  // Removes every key except those under one of `keep`; how many it removed. Throws
  // accel::Error when it cannot.
  virtual size_t clearKeysExcept(const std::vector<std::string>& keep) = 0;
  // Keep-alive counter `key` (RoundKeys::alive) as last written, 0 before any write: the
  // master's link reads every member's this way, without a request to its own store. Never
  // blocks long; thread-safe.
  virtual int64_t keepAlives(const std::string& key) const = 0;
};

// The agents' keep-alive counters as the store's server writes them: observer() goes into its
// options (TcpStoreServerOptions::observed), and the server's thread tells every write there.
// Thread-safe.
class KeepAliveBoard {
 public:
  // The writes to observe: job `runId`'s keys; those of keep-alives are kept.
  store::TcpStoreServerOptions::ObservedKeys observer(const std::string& runId);
  // Keep-alive counter `storedKey` (as the server stores it), 0 before any write.
  int64_t count(const std::string& storedKey) const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, int64_t> counts_;
};

// The agent's TcpStoreServer as a StoreHost. `server` outlives it; `keepAlives` is the board its
// options observe with (KeepAliveBoard::observer).
class TcpStoreHost : public StoreHost {
 public:
  TcpStoreHost(store::TcpStoreServer& server, std::shared_ptr<const KeepAliveBoard> keepAlives)
      : server_(server), keep_alives_(std::move(keepAlives)) {}
  bool waiting(const std::string& presenceKey, std::chrono::milliseconds grace) const override;
  size_t presentCount() const override;
  bool awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const override;
  bool awaitWatches(size_t count, std::chrono::milliseconds timeout) const override;
  size_t clearKeysExcept(const std::vector<std::string>& keep) override;
  int64_t keepAlives(const std::string& key) const override;

 private:
  store::TcpStoreServer& server_;
  const std::shared_ptr<const KeepAliveBoard> keep_alives_;
};

}  // namespace accel::launcher
