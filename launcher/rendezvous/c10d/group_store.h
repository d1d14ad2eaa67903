#pragma once
// GroupStore: how StoreRounds (c10d/store_rounds.h) reaches the job's store — wait until it can be
// reached, open connections to it — and, when this agent hosts it (the master), its StoreHost
// (store_host.h). The others have no StoreHost.
//
// TcpGroupStore is the agents' (the TCP client; the host is TcpStoreHost);
// tests run whole rounds of several agents over a simulated pair in simulated time
// (tests/launcher/rendezvous/sim_group_store.h), an agent's death and freezing included.
//
// Keys are given as the agents write them (round/keys.h); the TCP host translates them to what its
// server holds.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/c10d/link_store.h"
#include "launcher/rendezvous/machine_group.h"
#include "launcher/rendezvous/store_host.h"
#include "libaccel/common/expected.h"
#include "probes/net_check.h"

namespace accel::launcher {

// What one knock at the store's door found (GroupStore::knock).
enum class Knock {
  kAnswers,  // a connection was made: the store is up and reached
  kRefused,  // its host answered that nothing listens: the store (its agent) is gone
  kSilent,   // nothing answered: its machine or the path to it is down
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
  // One try to connect (closed again at once), given `timeout`; what answered. Never throws.
  virtual Knock knock(std::chrono::milliseconds timeout) = 0;
  // The store's host when this agent is it (the master), else nullptr.
  virtual StoreHost* host() const = 0;
  // "HOST:PORT", for messages.
  virtual std::string address() const = 0;
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
  Knock knock(std::chrono::milliseconds timeout) override;
  StoreHost* host() const override { return store_host_; }
  std::string address() const override { return host_ + ":" + std::to_string(port_); }

 private:
  const std::string host_;
  const int port_;
  const std::string address_flag_;
  StoreHost* const store_host_;
};

}  // namespace accel::launcher
