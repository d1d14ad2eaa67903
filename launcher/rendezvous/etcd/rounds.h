#pragma once
// EtcdRounds: the rounds of a multi-machine job met in etcd (`--rdzv_backend etcd`), as a
// RoundBackend (round_group.h), where no machine is a single point of failure (beside
// StoreRounds's master-hosted store, c10d/store_rounds.h):
//   - the agent holds a lease for the whole job (etcd/lease.h), and every registration of it is
//     attached to the lease: its death is seen by every other agent within the keep-alive window;
//   - each round is met on etcd (etcd/meeting.h): any agent closes it, and its machine 0 is the
//     first in its record (the round before's machine 0 while it lives), whose agent's own store
//     serves the round's workers (MASTER_ADDR and MASTER_PORT of that round) — every agent hosts
//     one, so machine 0 can be any of them;
//   - the round's link (etcd/link.h) hears failures, lost machines and arrivals, every agent
//     alike;
//   - a failed round's end is decided by every agent from what etcd holds, the first decision
//     published standing (RoundCloser with settings.leaderless, over an EtcdStore).
// Losing machine 0 is then like losing any machine: the survivors re-form and choose another.
//
// As RoundBackend: called from the agent's main thread (interrupt() from any), each method
// bounded by the settings' timeouts, nothing throws.

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "launcher/plan/launch_plan.h"
#include "launcher/plan/placement.h"
#include "launcher/rendezvous/etcd/client/etcd_client.h"
#include "launcher/rendezvous/etcd/lease.h"
#include "launcher/rendezvous/etcd/link.h"
#include "launcher/rendezvous/etcd/meeting.h"
#include "launcher/rendezvous/etcd/store.h"
#include "launcher/rendezvous/round_group.h"
#include "launcher/rendezvous/round_records.h"
#include "launcher/rendezvous/store_host.h"
#include "probes/environment.h"

namespace accel::launcher {

class EtcdRounds : public RoundBackend {
 public:
  // `etcd`: the cluster (--rdzv_endpoint); `root`: where the job's keys live in it ("" in
  // production; the tests' own prefix). `storePort` and `store`: this agent's own store, which
  // serves the workers in every round where this machine is machine 0. `store` outlives the
  // rounds. `access`: how etcd is reached, and the clock of the rounds, the lease's and the
  // link's threads and the round's end (tests/launcher/rendezvous/etcd_group_test.cc: a simulated
  // cluster in simulated time).
  EtcdRounds(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
             EtcdOptions etcd, std::string root, int storePort, StoreHost* store,
             EtcdAccess access = realEtcd());
  ~EtcdRounds() override;

  const GroupSettings& settings() const override { return settings_; }
  // Takes a lease for this agent (its registrations are attached to it) and finds the round to
  // join (the one forming, or the next after the last that formed: a machine arriving while the
  // job runs). Again for a machine the others dropped: a new token, a new lease. An error naming
  // etcd's endpoints.
  Expected<RoundStart> enter() override;
  // One meeting on etcd (etcd/meeting.h).
  Expected<RendezvousResult> join(const RoundStart& start) override;
  // Says this machine took its place (a key not under the lease: it tells the others, once the
  // lease ended, that this agent lived past the round's close) and where the job is, then starts
  // the round's link.
  Expected<RoundLink*> watch(const RoundStart& start, const RendezvousResult& joined) override;
  // The rounds' store over etcd (its calls bounded by etcd's client).
  store::Store& records(std::chrono::milliseconds) override { return *store_; }
  // The registrations for round `round` that are not `joined`'s members (a member may have
  // registered already, having decided first): those marked newcomers (etcd/meeting.h), which live
  // as long as their agent's lease.
  int waiting(int round, const RendezvousResult& joined) const override;
  bool othersGone(int round) const override;
  // Dropped once its lease is lost, or the round's link heard this machine named lost (an agent
  // frozen past its lease's end may hear that before its next renewal is refused).
  Standing standing(const std::optional<RendezvousResult>& joined) const override;
  bool decidesAlone() const override { return false; }
  StoreHost* hostedStore() const override { return store_host_; }
  Placement placementOf(const RendezvousResult& joined) const override;
  void closeJob(int round, const std::string& why) override;
  // Machine 0 of a job that ended everywhere, the last to leave: the job's keys go.
  void afterLeaving(bool host, bool allFinished) override;
  void stopLink() override;
  // Wakes a meeting in progress (etcd/meeting.h's cancel_fd) and fails the meetings after it.
  void interrupt() override;
  std::string statusKeyPrefix() const override { return jobKeys().statusPrefix(); }

 private:
  EtcdMeeting meeting() const;
  Expected<RoundStart> enterJob();
  // The job's keys in etcd (under root_).
  JobKeys jobKeys() const { return JobKeys(settings_.run_id, root_); }
  RendezvousResult asRendezvousResult(const EtcdRound& r) const;
  void onLeaseLost(const std::string& why);
  std::string advertisedAddress() const;
  void noteRunningRound(int running);
  void removeJob();
  std::string etcdText() const;

  const LaunchPlan& plan_;
  const probes::Environment& parent_env_;
  const Notify notify_;
  EtcdOptions etcd_;  // first_endpoint set by enter(), then never changed
  const EtcdAccess access_;
  const std::string root_;
  const int store_port_;
  StoreHost* const store_host_;
  GroupSettings settings_;  // the round end's and the exit barrier's (its store: store_)
  EtcdMember me_;
  // The round this agent met last (under its token): its machine rank there (a survivor keeps its
  // order in the next), where its places are and the revision its record was made from (the
  // link's).
  struct LastRound {
    int round = -2;
    int machine_rank = -1;
    std::string places;
    int64_t seen_at = 0;
  } last_;
  std::unique_ptr<EtcdApi> client_;   // the main thread's
  std::unique_ptr<EtcdStore> store_;  // the main thread's, for the round's end
  std::unique_ptr<EtcdLease> lease_;
  bool job_over_ = false;          // closeJob: the job ended on every machine
  int interrupt_fd_ = -1;          // readable once interrupted (an eventfd; never drained)
  mutable std::mutex link_mutex_;  // link_ is swapped by the main thread, told by the lease's
  std::unique_ptr<EtcdLink> link_;
};

// A group of rounds met on etcd (RoundGroup over EtcdRounds; arguments as EtcdRounds's). Its
// connect() takes the lease.
std::unique_ptr<RoundGroup> makeEtcdGroup(const LaunchPlan& plan,
                                          const probes::Environment& parentEnv,
                                          const Notify& notify, EtcdOptions etcd, std::string root,
                                          int storePort, StoreHost* store,
                                          EtcdAccess access = realEtcd());

}  // namespace accel::launcher
