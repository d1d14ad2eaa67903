#pragma once
// StoreRounds: the rounds of a multi-machine job met in the master agent's store (torchrun's c10d
// command line), as a RoundBackend (round_group.h) — reach the master's store and keep this
// agent's presence in it (enter), meet in it (c10d/rendezvous.h: join), keep the round's failure
// link (c10d/job_link.h: watch), the round's records in it, and the master's view of who is still
// connected (presence). The master hosts the store: machine 0 of every round, it decides each
// failed round's end alone, and stays until the others left.
//
// The store is reached through a GroupStore (c10d/group_store.h): TCP to the master's, or in memory
// in the tests. Every method blocks on the master's store (bounded by its RoundTimeouts,
// round_timeouts.h) and must be called from the agent's main thread, which owns the store
// connection, but interrupt(); the link's thread has connections of its own. Nothing throws: a
// store that cannot be reached is an error naming the store.

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "launcher/plan/launch_plan.h"
#include "launcher/plan/placement.h"
#include "launcher/rendezvous/c10d/group_store.h"
#include "launcher/rendezvous/c10d/job_link.h"
#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/round_group.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"
#include "probes/net_check.h"

namespace accel::launcher {

class StoreRounds : public RoundBackend {
 public:
  // `store`: how this agent reaches the job's store (its port, `storePort`, is the workers'
  // MASTER_PORT); the agent whose `store` has a host() hosts it and is the master, machine 0 of
  // every round, so `requestedRank` is then 0. Another agent asks for `requestedRank` (nullopt: by
  // arrival). `clock` times the rounds' rules and runs the link's thread (a simulated one in the
  // tests: tests/launcher/rendezvous/sim_group_store.h).
  StoreRounds(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
              std::optional<int> requestedRank, int storePort, std::unique_ptr<GroupStore> store,
              std::shared_ptr<Clock> clock = std::make_shared<MonotonicClock>());
  ~StoreRounds() override;

  // What the master's store counts the agents' failure watches by (awaitWatches, before a
  // round's attempt starts): the prefix of the WAITs each agent parks on its round's stop key.
  static std::string trackedWaitPrefix(const std::string& rendezvousId);
  // What the presence keys of the job's agents start with (the store's presence_key_prefix).
  static std::string presenceWaitPrefix(const std::string& rendezvousId);

  const GroupSettings& settings() const override { return settings_; }
  // Waits until the master's store listens (it may start after this agent) and connects to it;
  // the master opens round 0, another agent joins the round the master opened last.
  Expected<RoundStart> enter() override;
  // Parks the round's failure watch, then joins the rendezvous.
  Expected<RendezvousResult> join(const RoundStart& start) override;
  // The master first waits until every member's failure watch is parked.
  Expected<RoundLink*> watch(const RoundStart& start, const RendezvousResult& joined) override;
  store::Store& records(std::chrono::milliseconds bound) override;
  // The machines registered for round `round` whose agents are still connected (the master
  // sees who is present; nobody registers for a later round before its decision).
  int waiting(int round, const RendezvousResult& joined) const override;
  bool othersGone(int round) const override;
  // Cut off once the link found the master lost (or the store was never reached) — but a
  // non-master of an elastic job knocks once first: a store that does not answer is out of reach
  // (this machine may have been cut off), one that refuses connections is gone.
  Standing standing(const std::optional<RendezvousResult>& joined) const override;
  bool decidesAlone() const override { return master(); }
  StoreHost* hostedStore() const override { return host_; }
  Placement placementOf(const RendezvousResult& joined) const override;
  // The master: the spares waiting for round `round` are told the job ended.
  void closeJob(int round, const std::string& why) override;
  // The master keeps its store up until the spares left too (they read the job's end in it).
  void afterLeaving(bool host, bool allFinished) override;
  void stopLink() override;
  void interrupt() override;
  std::string statusKeyPrefix() const override { return jobKeys(settings_).statusPrefix(); }

 private:
  bool master() const { return host_ != nullptr; }
  const RoundTimeouts& timeouts() const { return settings_.timeouts; }
  Expected<void> parkFailureWatch(int round);
  Expected<void> checkJobId();
  Expected<RoundStart> openedRound();
  Expected<void> reachAgain();
  std::string unreachable(const std::exception& e) const;
  void parkPresence();
  bool present(const std::string& token, std::chrono::milliseconds grace) const;
  LinkOptions linkOptions(int round, const RendezvousResult& joined) const;

  const LaunchPlan& plan_;
  const probes::Environment& parent_env_;
  const Notify notify_;
  const int store_port_;
  const std::unique_ptr<GroupStore> store_;
  StoreHost* const host_;  // the store's, when this agent hosts it
  std::optional<probes::Route> to_master_;
  std::unique_ptr<LinkStore> client_;  // the main thread's
  LinkConnections link_connections_;   // made before the rendezvous, for the link
  // What the user asked for and who this agent is: made by the constructor and enter(), then
  // never changed.
  GroupSettings settings_;
  std::unique_ptr<JobLink> link_;
  // What the knock after the link lost the master found (standing), once per link.
  mutable std::optional<Standing> after_loss_;
  std::atomic<bool> interrupted_{false};  // interrupt() was called: reachAgain() gives up
  // The master's: the presence tokens of agents found gone (asked by the main thread and the
  // link's).
  mutable std::mutex gone_mutex_;
  mutable std::set<std::string> gone_;
};

// A group of rounds met in the master's store (RoundGroup over StoreRounds; arguments as
// StoreRounds's). Its connect() reaches the store.
std::unique_ptr<RoundGroup> makeStoreGroup(
    const LaunchPlan& plan, const probes::Environment& parentEnv, const Notify& notify,
    std::optional<int> requestedRank, int storePort, std::unique_ptr<GroupStore> store,
    std::shared_ptr<Clock> clock = std::make_shared<MonotonicClock>());

}  // namespace accel::launcher
