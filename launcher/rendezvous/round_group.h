#pragma once
// RoundGroup: one agent's part in a multi-machine job, round by round (machine_group.h), written
// once for every backend — the rounds' order, the spare's wait for a later round, the restart
// decision after a failure (RoundCloser), a machine dropped by the others coming back as a
// newcomer, the job's end told to the spares, the exit barrier — over a RoundBackend: where the
// machines meet. Two backends: the master agent's store (c10d/store_rounds.h, torchrun's c10d
// command line) and etcd (etcd/rounds.h, no machine in charge).
//
// The seam, in the order a round uses it:
//   enter    reach the rendezvous, this agent's presence there, the round to join first
//   join     register for a round and await its record (the members, this machine's place)
//   watch    the round's link: failures, lost machines, arrivals (round_link.h)
//   records  the store of the round's stop record (one compare-and-set), its ends and decision
//   presence who waits for the next round, whether the others left, whether this one was cut off
//
// As MachineGroup: called from the agent's main thread (interrupt() from any), each method
// bounded by the settings' timeouts, nothing throws.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/plan/placement.h"
#include "launcher/rendezvous/machine_group.h"
#include "launcher/rendezvous/round/state.h"
#include "launcher/rendezvous/round_close.h"
#include "libaccel/common/expected.h"
#include "libaccel/store/store.h"

namespace accel::launcher {

// Where this machine stands with the job after a round, as its backend sees it.
struct Standing {
  enum class Kind {
    kMember,   // in the job
    kDropped,  // the others went on without it (found silent); it may come back as a newcomer
    // The rendezvous stopped answering (the master's store, its connections timed out): this
    // machine was cut off — the others go on without it, and it may come back as a newcomer once
    // it reaches the rendezvous again (enter) — or the rendezvous is gone.
    kOutOfReach,
    kCutOff,  // the rendezvous itself is gone for it (the master's store): nothing to agree on
  };
  Kind kind = Kind::kMember;
  std::string why;  // kDropped, kOutOfReach: what ended its membership, for the notice
};

class RoundBackend {
 public:
  virtual ~RoundBackend() = default;

  // The user's settings and who this agent is (complete once enter() succeeded; read by the
  // group's rules, the round's end and the exit barrier).
  virtual const GroupSettings& settings() const = 0;

  // Reaches the rendezvous and takes this agent's presence there; returns the round to join first
  // (round 0, or the round the group opened last for a machine arriving while the job runs). Called
  // once, and again (a new presence) by a machine the others dropped or that was out of reach (it
  // tries to reach the rendezvous again first, at most timeouts.reach_again). An error names the
  // endpoint.
  virtual Expected<RoundStart> enter() = 0;
  // Registers this machine for round `start` and awaits the round's record: this machine's place,
  // or `spare` (the round closed without it) with the round's size and restart count, or `closed`
  // (the job ended). An error when the round cannot form, naming what is missing.
  virtual Expected<RendezvousResult> join(const RoundStart& start) = 0;
  // The link of round `start` as it formed (`joined`): its failures, lost machines and arrivals.
  // The backend owns it until the next watch(); an error when the rendezvous cannot be reached.
  virtual Expected<RoundLink*> watch(const RoundStart& start, const RendezvousResult& joined) = 0;
  // Where the round's stop record, its ends and its decision live, each call bounded by `bound`
  // where the backend's client takes a bound (the master's store; etcd's calls have their own).
  virtual store::Store& records(std::chrono::milliseconds bound) = 0;
  // Presence: how many machines registered for round `round` whose agents are still there, the
  // members of `joined` not counted. Never throws (0 when the rendezvous cannot be read).
  virtual int waiting(int round, const RendezvousResult& joined) const = 0;
  // Presence: no other agent of round `round` is there any more (the exit barrier may end).
  virtual bool othersGone(int round) const = 0;
  // Presence: where this machine stands after round `round` (the link's and the lease's word).
  // May knock once at the rendezvous to tell kOutOfReach from kCutOff (the store: bounded by
  // timeouts.knock_every, asked once per round).
  virtual Standing standing(const std::optional<RendezvousResult>& joined) const = 0;

  // This agent hosts the rendezvous and decides each round's end alone (the master's store);
  // false where every agent decides (etcd).
  virtual bool decidesAlone() const = 0;
  // The store this agent hosts for the workers of the rounds where it is machine 0 (cleared
  // before each later round); nullptr: none.
  virtual StoreHost* hostedStore() const = 0;
  // The round as the workers see it (their MASTER_ADDR, ranks, interface).
  virtual Placement placementOf(const RendezvousResult& joined) const = 0;
  // The job ended (`why`): round `round` will never form, and machines waiting for it are told.
  virtual void closeJob(int round, const std::string& why) = 0;
  // After the exit barrier: `host` (this agent's store served the workers) saw `allFinished`.
  virtual void afterLeaving(bool host, bool allFinished) = 0;
  // Ends the current link's thread within a moment (RoundLink::stop).
  virtual void stopLink() = 0;
  // Makes a join() blocked on the network return at once with an error. Any thread.
  virtual void interrupt() = 0;
  // Where the other machines' `accel status` answers are.
  virtual std::string statusKeyPrefix() const = 0;
};

class RoundGroup final : public MachineGroup {
 public:
  RoundGroup(Notify notify, std::unique_ptr<RoundBackend> backend);
  ~RoundGroup() override;

  // Round 0: reaches the rendezvous (RoundBackend::enter). An error naming the endpoint.
  Expected<void> connect();

  // Asked before this machine registers for each round: why it is unhealthy now (nullopt:
  // healthy). One that is not stays out of the round — the others go on without it where MIN
  // allows, or wait for it, naming it — and asks again every `interval` until it is (or the group
  // is interrupted). Unset: every machine is healthy. Before the first meet().
  using HealthGate = std::function<std::optional<std::string>()>;
  void setHealthGate(HealthGate gate, std::chrono::milliseconds interval);

  // Meets the other machines in the next round (the first: connect()'s; then one per restart or
  // change of the group): joins until a round takes this machine (a spare tries the next), then
  // watches it. An error when the round cannot form, or when the job ended first (jobClosed()).
  Expected<Placement> meet() override;
  int round() const override { return round_.round; }
  RoundLink* link() const override { return link_; }
  RoundDecision endRound(AttemptReport& last, bool stopping) override;
  void closeJob(const std::string& why) override;
  void stopLink() override { backend_->stopLink(); }
  void awaitOtherMachines() override;
  bool jobClosed() const override { return !closed_.empty(); }
  void interrupt() override;
  std::string host() const override { return settings().host; }
  std::string statusKeyPrefix() const override { return backend_->statusKeyPrefix(); }

 private:
  const GroupSettings& settings() const { return backend_->settings(); }
  Expected<RendezvousResult> joinAsMember();
  Expected<void> awaitHealthy();
  void announce(const Placement& p);
  RoundDecision comeBack(AttemptReport& last, const Standing& standing);
  void readStopOf(AttemptReport& last);

  const Notify notify_;
  const std::unique_ptr<RoundBackend> backend_;
  RoundStart round_;                // the round meet() formed (or tries to form) last
  std::optional<RoundStart> next_;  // the round meet() joins next, as decided
  std::optional<RendezvousResult> joined_;
  RoundLink* link_ = nullptr;  // the backend's, for joined_
  std::string closed_;
  // Its part in each failed round's end (the memory of the round before included).
  std::optional<RoundCloser> closer_;
  bool leaving_alone_ = false;   // this machine stops while the others may go on
  bool rejoining_ = false;       // dropped by the others: the next meet() enters as a newcomer
  bool interface_said_ = false;  // the workers' GLOO_SOCKET_IFNAME was said
  HealthGate health_;
  std::chrono::milliseconds health_interval_{30000};
  std::atomic<bool> interrupted_{false};  // interrupt() was called (from any thread)
};

}  // namespace accel::launcher
