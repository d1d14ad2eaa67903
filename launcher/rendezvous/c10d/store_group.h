#pragma once
// StoreGroup: one agent's part in a multi-machine job, round by round (machine_group.h) —
// reach the master's store, meet the other machines (c10d/rendezvous.h), keep the round's
// failure link (c10d/job_link.h), agree with the others whether the job restarts after a failure
// (round_end.h), and the exit barrier at the end.
//
// The store is reached through a GroupStore (c10d/group_store.h): TCP to the master's, or in memory
// in the tests. Every method blocks on the master's store (bounded by its RoundTimeouts,
// round_timeouts.h) and must be called from the agent's main thread, which owns the group's store
// connection, but interrupt() (machine_group.h); the link's thread has connections of its own.
// Nothing throws: a store that cannot be reached is an error or a decision not to restart, naming
// the store.

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
#include "launcher/rendezvous/machine_group.h"
#include "launcher/rendezvous/round_close.h"
#include "launcher/rendezvous/round_end.h"
#include "launcher/report/job_report.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"
#include "probes/net_check.h"

namespace accel::launcher {

class StoreGroup : public MachineGroup {
 public:
  // `store`: how this agent reaches the job's store (its port, `storePort`, is the workers'
  // MASTER_PORT); the agent whose `store` has a host() hosts it and is the master, machine 0 of
  // every round, so `requestedRank` is then 0. Another agent asks for `requestedRank`
  // (nullopt: by arrival). `clock` times the rounds' rules and runs the link's thread (a
  // simulated one in the tests: tests/launcher/rendezvous/sim_group_store.h).
  StoreGroup(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
             std::optional<int> requestedRank, int storePort, std::unique_ptr<GroupStore> store,
             std::shared_ptr<Clock> clock = std::make_shared<MonotonicClock>());
  ~StoreGroup() override;

  // What the master's store counts the agents' failure watches by (awaitWatches, before a
  // round's attempt starts): the prefix of the WAITs each agent parks on its round's stop key.
  static std::string trackedWaitPrefix(const std::string& rendezvousId);
  // What the presence keys of the job's agents start with (the store's presence_key_prefix).
  static std::string presenceWaitPrefix(const std::string& rendezvousId);

  // Round 0: waits until the master's store listens (it may start after this agent) and
  // connects to it.
  Expected<void> connect();
  // Meets the other machines in the next round (the first: round 0, or for a machine that
  // arrives while the job runs, the round the master opened last; then one per restart or
  // change of the group): parks the round's failure watch, joins the rendezvous, and returns
  // this machine's placement in it. A spare (the group was full) waits for the next round. An
  // error when the rendezvous fails, or when the job ended first (jobClosed()).
  Expected<Placement> meet() override;
  int round() const override { return round_.round; }
  // The job ended while this machine waited to join it (a spare): nothing to do.
  bool jobClosed() const override { return !closed_.empty(); }
  // The master, when the job ends: the spares waiting for the next round are told.
  void closeJob(const std::string& why) override;
  // The round's link, for the supervisor (nullptr before meet succeeded).
  RoundLink* link() const override { return link_.get(); }
  // After the round's attempt failed: reads the round's stop record into `last.job_failure` (or
  // `last.regrouped`, the group's growth) and, while the job may restart, takes part in the round's
  // end (the master decides, the others wait for it). `stopping`: this agent was told to stop, so
  // it will not go on.
  RoundDecision endRound(AttemptReport& last, bool stopping) override;
  // Ends the link's thread (within a moment, whatever the network does: JobLink::stop).
  void stopLink() override;
  // The exit barrier (skipped once the master is lost): the master keeps its store up until
  // the other machines are done with it.
  void awaitOtherMachines() override;
  void interrupt() override;

  std::string statusKeyPrefix() const override { return jobKeys(settings_).statusPrefix(); }
  std::string host() const override { return settings_.host; }

 private:
  // This agent hosts the job's store: machine 0 of every round, which watches the members,
  // decides each round's end, and stays until the others left.
  bool master() const { return host_ != nullptr; }
  const RoundTimeouts& timeouts() const { return settings_.timeouts; }
  Expected<void> parkFailureWatch();
  Expected<void> checkJobId();
  std::string unreachable(const std::exception& e) const;
  void parkPresence();
  bool present(const std::string& token, std::chrono::milliseconds grace) const;
  Expected<RendezvousResult> join();
  Expected<RendezvousResult> joinAsMember();
  LinkOptions linkOptions() const;
  Placement placementOf(const RendezvousResult& joined) const;
  void announce(const Placement& p);

  const LaunchPlan& plan_;
  const probes::Environment& parent_env_;
  const Notify notify_;
  const std::optional<int> requested_rank_;
  const int store_port_;
  const std::unique_ptr<GroupStore> store_;
  StoreHost* const host_;  // the store's, when this agent hosts it
  std::optional<probes::Route> to_master_;
  std::unique_ptr<LinkStore> client_;  // the main thread's
  LinkConnections link_connections_;   // made before the rendezvous, for the link
  // This agent's presence: a wait parked on its presence key for the whole job.
  std::unique_ptr<LinkStore> presence_store_;
  // What the user asked for and who this agent is: made by the constructor and connect(), then
  // never changed.
  GroupSettings settings_;
  RoundStart round_;                // the round meet() formed (or tries to form) last
  std::optional<RoundStart> next_;  // the round meet() joins next, as decided
  std::optional<RendezvousResult> joined_;
  std::string closed_;
  std::unique_ptr<JobLink> link_;
  // Its part in each failed round's end (the master's memory of the round before included).
  std::optional<RoundCloser> closer_;
  std::atomic<bool> interrupted_{false};  // interrupt() was called (from any thread)
  // The master's: the presence tokens of agents found gone (asked by the main thread and the
  // link's).
  mutable std::mutex gone_mutex_;
  mutable std::set<std::string> gone_;
};

}  // namespace accel::launcher
