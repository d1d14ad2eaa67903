#pragma once
// RoundCloser: one agent's part in the end of a failed round of a multi-machine job, the
// protocol of round_end.h: it reads what stopped the round (its first failure, or a machine
// waiting to join), tells the master that this machine's workers all ended, and comes back
// with the one decision for the whole job — the master makes it from what it saw
// (decideNextRound) and remembers the round's failure for the next one (no blind retry); the
// others read it (on etcd, where no agent is in charge, every agent decides and the first
// decision published stands). It works over any store::Store and the settings' clock, so several
// agents are unit-tested together in simulated time
// (tests/launcher/rendezvous/round_close_sim_test.cc); RoundGroup (round_group.h) runs it over
// its backend's records: the master's store, or etcd through EtcdStore.
//
// Not thread-safe: the agent's main thread calls it. Nothing throws: a store that cannot be
// reached is a decision not to restart, naming the store.

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "launcher/rendezvous/round_end.h"
#include "launcher/report/job_report.h"
#include "libaccel/store/store.h"

namespace accel::launcher {

// Fills `last.job_failure` (or `last.regrouped`, the group's growth) from round `round`'s stop
// record when there is one (waiting for it at most `wait` once it is known to exist; 0: only when
// it is there now). Leaves `last` as it is when there is none or the store cannot be read; never
// throws.
void readRoundStop(store::Store& store, const GroupSettings& settings, int round,
                   AttemptReport& last, std::chrono::milliseconds wait);

class RoundCloser {
 public:
  // What the group's link and store say of the machines now, asked while the round closes.
  struct GroupNow {
    // The members found lost so far (the master's link), asked while their ends are missing.
    std::function<std::vector<LostMachine>()> lost;
    // How many machines registered for the next round whose agents are still there, this round's
    // members not counted: the next round expects them (one that died waiting would stall it
    // until its last call). Asked once, after every member's end is in.
    std::function<int()> waiting;
  };

  // `master`: this agent hosts the job's store and decides. With settings.leaderless there is
  // no master (rounds on etcd): the round's lowest member not found lost decides from what the
  // store holds (the next, when it is lost too), the others read its decision; the first
  // decision published stands.
  RoundCloser(GroupSettings settings, bool master);

  // Round `start.round` failed; `joined` is that round as it formed. Fills `last.job_failure`
  // (or `last.regrouped`, a machine waiting to join) from the round's stop record, and returns
  // the job's decision. `stopping`: this agent was told to stop; it says so and leaves (no
  // decision for it). Blocks on `store`, each wait bounded by the settings' timeouts; calls
  // without a timeout of their own are bounded by the store's (the caller's to set).
  RoundDecision close(store::Store& store, const RoundStart& start, const RendezvousResult& joined,
                      AttemptReport& last, bool stopping, const GroupNow& now);

 private:
  RoundDecision leave(store::Store& store, int round, const RoundEnd& mine,
                      const AttemptReport& last);
  RoundDecision decide(store::Store& store, const RoundStart& start, const RendezvousResult& joined,
                       const AttemptReport& last, const GroupNow& now);
  RoundDecision awaitDecider(store::Store& store, const RoundStart& start,
                             const RendezvousResult& joined, AttemptReport& last,
                             const GroupNow& now);
  RoundFacts factsOf(const RoundStart& start, const RendezvousResult& joined,
                     const AttemptReport& last) const;

  const GroupSettings settings_;
  const bool master_;
  const bool everyone_decides_;
  RoundMemory memory_;  // the decider's memory of the round before (no blind retry)
};

}  // namespace accel::launcher
