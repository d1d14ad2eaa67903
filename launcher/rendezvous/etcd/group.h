#pragma once
// EtcdGroup: one agent's part in a multi-machine job whose rounds live in etcd (issue 34;
// `--rdzv_backend etcd`), where no machine is a single point of failure (machine_group.h's
// second store-backed group, beside StoreGroup's master-hosted store):
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
// As MachineGroup: called from the agent's main thread (interrupt() from any), each method
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
#include "launcher/rendezvous/machine_group.h"
#include "launcher/rendezvous/round_close.h"
#include "launcher/rendezvous/round_records.h"
#include "launcher/rendezvous/store_host.h"
#include "probes/environment.h"

namespace accel::launcher {

class EtcdGroup : public MachineGroup {
 public:
  // `etcd`: the cluster (--rdzv_endpoint); `root`: where the job's keys live in it ("" in
  // production; the tests' own prefix). `storePort` and `store`: this agent's own store, which
  // serves the workers in every round where this machine is machine 0. `store` outlives the
  // group. `access`: how etcd is reached, and the clock of the rounds, the lease's and the
  // link's threads and the round's end (tests/launcher/rendezvous/etcd_group_test.cc: a simulated
  // cluster in simulated time).
  EtcdGroup(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
            EtcdOptions etcd, std::string root, int storePort, StoreHost* store,
            EtcdAccess access = realEtcd());
  ~EtcdGroup() override;

  // Takes the lease and finds the round to join (the one forming, or the next after the last
  // that formed: a machine arriving while the job runs). An error naming etcd's endpoints.
  Expected<void> connect();

  Expected<Placement> meet() override;
  int round() const override { return round_.round; }
  RoundLink* link() const override { return link_.get(); }
  RoundDecision endRound(AttemptReport& last, bool stopping) override;
  void closeJob(const std::string& why) override;
  void stopLink() override;
  void awaitOtherMachines() override;
  bool jobClosed() const override { return !closed_.empty(); }
  // Wakes a meeting in progress (etcd/meeting.h's cancel_fd) and fails the meetings after it.
  void interrupt() override;
  std::string host() const override { return settings_.host; }
  std::string statusKeyPrefix() const override {
    return JobKeys(settings_.run_id, root_).statusPrefix();
  }

 private:
  Expected<EtcdRound> joinRound();
  int waitingForNextRound() const;
  EtcdRoundSettings roundSettings() const;
  Placement placementOf(const EtcdRound& r) const;
  RendezvousResult asRendezvousResult(const EtcdRound& r) const;
  void onLeaseLost(const std::string& why);
  bool droppedByOthers() const;
  std::string advertisedAddress() const;
  void noteRunningRound(int running);
  void removeJob();
  Expected<void> enterJob();
  RoundDecision comeBack(AttemptReport& last);
  std::string etcdText() const;

  const LaunchPlan& plan_;
  const probes::Environment& parent_env_;
  const Notify notify_;
  EtcdOptions etcd_;  // first_endpoint set by connect(), then never changed
  const EtcdAccess access_;
  const std::string root_;
  const int store_port_;
  StoreHost* const store_host_;
  GroupSettings settings_;  // the round end's and the exit barrier's (its store: store_)
  EtcdMember me_;
  std::unique_ptr<EtcdApi> client_;   // the main thread's
  std::unique_ptr<EtcdStore> store_;  // the main thread's, for the round's end
  std::unique_ptr<EtcdLease> lease_;
  RoundStart round_;
  std::optional<RoundStart> next_;
  std::optional<EtcdRound> joined_;
  std::string closed_;
  bool leaving_alone_ = false;     // this machine stops while the others may go on
  bool job_over_ = false;          // closeJob: the job ended on every machine
  bool rejoining_ = false;         // dropped by the others: the next meet() joins as a newcomer
  int interrupt_fd_ = -1;          // readable once interrupted (an eventfd; never drained)
  mutable std::mutex link_mutex_;  // link_ is swapped by the main thread, told by the lease's
  std::unique_ptr<EtcdLink> link_;
  std::optional<RoundCloser> closer_;
};

}  // namespace accel::launcher
