#pragma once
// GroupStore: how a StoreGroup (store_group.h) reaches the job's store — wait until it can be
// reached, open connections to it — and StoreHost: what the store's own host knows that no
// client call says (which agents are present, how many failure watches are parked) and does
// between attempts (clear the workers' keys). The agent that hosts the store is the master; the
// others have no StoreHost.
//
// TcpGroupStore and TcpStoreHost are the agents' (the TCP client, the agent's TcpStoreServer);
// tests run whole rounds of several StoreGroups over a simulated pair in simulated time
// (tests/launcher/rendezvous/sim_group_store.h), an agent's death and freezing included.
//
// Keys are given as the agents write them (job_keys.h); the TCP host translates them to what its
// server holds.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/link_store.h"
#include "launcher/rendezvous/machine_group.h"
#include "libaccel/common/expected.h"
#include "probes/net_check.h"

namespace accel::store {
class TcpStoreServer;
}

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
};

// How one agent reaches the job's store. Called from the agent's main thread.
class GroupStore {
 public:
  virtual ~GroupStore() = default;
  // Blocks until the store can be reached (at most `timeout`, saying how it goes through
  // `progress` every `progressEvery`); the route that reaches it (nullopt: none to name). An
  // error naming the store.
  virtual Expected<std::optional<probes::Route>> reach(std::chrono::milliseconds timeout,
                                                       std::chrono::milliseconds progressEvery,
                                                       const Notify& progress) = 0;
  // A new connection to the store, made within `timeout`; throws accel::Error when it cannot.
  virtual std::unique_ptr<LinkStore> connect(std::chrono::milliseconds timeout) = 0;
  // The store's host when this agent is it (the master), else nullptr.
  virtual StoreHost* host() const = 0;
  // "HOST:PORT", for messages.
  virtual std::string address() const = 0;
};

// The agent's TcpStoreServer as a StoreHost. `server` outlives it.
class TcpStoreHost : public StoreHost {
 public:
  explicit TcpStoreHost(store::TcpStoreServer& server) : server_(server) {}
  bool waiting(const std::string& presenceKey, std::chrono::milliseconds grace) const override;
  size_t presentCount() const override;
  bool awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const override;
  bool awaitWatches(size_t count, std::chrono::milliseconds timeout) const override;
  size_t clearKeysExcept(const std::vector<std::string>& keep) override;

 private:
  store::TcpStoreServer& server_;
};

// The master's store over TCP at `host`:`port`. `storeHost`: this agent's when it hosts the
// store (it outlives the GroupStore), else nullptr. `addressFlag` is the flag that named the
// host, for the advice when it cannot be reached.
class TcpGroupStore : public GroupStore {
 public:
  TcpGroupStore(std::string host, int port, std::string addressFlag, StoreHost* storeHost)
      : host_(std::move(host)),
        port_(port),
        address_flag_(std::move(addressFlag)),
        store_host_(storeHost) {}
  Expected<std::optional<probes::Route>> reach(std::chrono::milliseconds timeout,
                                               std::chrono::milliseconds progressEvery,
                                               const Notify& progress) override;
  std::unique_ptr<LinkStore> connect(std::chrono::milliseconds timeout) override;
  StoreHost* host() const override { return store_host_; }
  std::string address() const override { return host_ + ":" + std::to_string(port_); }

 private:
  const std::string host_;
  const int port_;
  const std::string address_flag_;
  StoreHost* const store_host_;
};

}  // namespace accel::launcher
