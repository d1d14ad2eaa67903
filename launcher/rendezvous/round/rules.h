#pragma once
// The one rule that decides what follows a failed or stopped round — restart or not, counted or
// not, how many machines the next round expects — as a pure function of what the deciding agent
// knows (RoundFacts), and the values it speaks in: a member found lost, one agent's report of its
// round's end, the decision. Pure: unit-tested alone (round_end_test.cc) and shared by every
// backend (the master decides on the store; every agent decides on etcd).

#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/round/state.h"
#include "launcher/report/job_report.h"

namespace accel::launcher {

// A member of the round found gone, and how it was found: "its agent is gone" (its connection
// to the job's store closed), "no keep-alive for 3 s" (its machine went silent).
struct LostMachine {
  int machine = 0;
  std::string how;
  bool operator==(const LostMachine& o) const { return machine == o.machine && how == o.how; }
};

// What one agent says when its workers of a failed round have all ended.
struct RoundEnd {
  int machine_rank = 0;
  std::string host;
  bool continues = true;  // it will join the next round
  std::string why_not;    // when it will not: "its agent received SIGTERM"
  // Some rank of the round completed a step, as this agent saw (the agent that hosts the
  // workers' store sees every rank's heartbeat; the others none).
  bool progress = false;
};

struct RoundDecision {
  bool restart = false;
  std::string why;        // "the job's 2 restarts are spent", "attempt 0 failed (...); restarting"
  bool counted = true;    // the restart counts against the budget (not: a machine joins)
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT of the next round
  int expect_machines = 0;  // the next round closes once this many joined (0: unknown)
  // A rank progressed in the round, as the decider saw it (leaderless: every agent remembers it
  // from the decision, for whichever decides the next round).
  bool progress = false;

  // The round it starts after round `round` (when it restarts).
  RoundStart next(int round) const { return {round + 1, restart_count, expect_machines}; }
};

// What the master knows when it decides.
struct RoundFacts {
  bool one_machine = false;        // a job of one machine (its notices name no machine)
  int round = 0;                   // the round that failed
  int restart_count = 0;           // its TORCHELASTIC_RESTART_COUNT: the restarts used so far
  int machines = 0;                // its group
  int max_machines = 0;            // the most the job takes (0: machines)
  int min_machines = 0;            // the fewest it runs on (0: machines)
  bool elastic = false;            // --nnodes MIN:MAX: machines may leave and join
  std::vector<LostMachine> lost;   // members found gone, in the order found
  std::vector<std::string> hosts;  // of the members, by machine rank
  int waiting = 0;                 // machines registered for the next round already
  int max_restarts = 0;
  bool retry_identical_failures = false;
  std::optional<JobFailure> failure;  // the round's first failure (nullopt: none was published)
  // No failure: the round stopped for the group to re-form around a machine waiting to join (why).
  std::optional<std::string> joined;
  bool progress = false;    // some rank of the round made progress (AttemptReport::progressed)
  bool heartbeats = false;  // judged by the ranks' heartbeats (else by their stdout)
  std::optional<JobFailure> previous;  // the round before's first failure, if it failed
  bool previous_progress = false;
  std::vector<RoundEnd> ends;  // the reports that came
};

// The rule, in this order. Members that are lost, did not report, or (elastic jobs) stop are
// dropped; a static job ends when one would be, an elastic one when fewer than min_machines
// remain, counting the machines already waiting to join. A machine waiting to join re-forms the
// group without counting a restart. Otherwise no restart when no worker failed (an agent stopped,
// the master lost), when the budget is spent, or when the last two rounds failed the same way
// without progress (repeatedFailure) unless identical failures are retried; else a restart,
// counted.
RoundDecision decideNextRound(const RoundFacts& facts);

// The deciding agent's memory of the round before, for the no-blind-retry rule: its first
// failure and whether any rank progressed. One per group (the one machine's, or the one that
// decides for many).
class RoundMemory {
 public:
  // decideNextRound on `facts` with the round before's failure and progress filled in; then
  // remembers `facts`' for the next decision.
  RoundDecision decide(RoundFacts facts);
  // Remembers a round another agent decided (leaderless): its failure, and its progress as the
  // decision says.
  void remember(const std::optional<JobFailure>& failure, bool progress);

 private:
  std::optional<JobFailure> failure_;
  bool progress_ = false;
};

}  // namespace accel::launcher
