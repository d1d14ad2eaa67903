#pragma once
// The end of a failed round of a multi-machine job, and the one decision that follows it.
//
// A failure anywhere stops every machine's workers (job_link.h). Then, while the job's restart
// budget is not spent, every agent tells the master that its workers have all ended and whether
// it will take part in another round (an agent told to stop will not); the master waits for all
// of them, decides — restart or not, and why — for the whole job, and publishes the decision
// (the workers' keys are cleared from its store when the next round meets). The others wait for it.
// So the budget is the job's (one count, the same TORCHELASTIC_RESTART_COUNT on every machine), a
// failure seen by every machine is counted once, and no worker of the next round starts while one
// of the last round may still write to the store.
//
// As in agent_rendezvous.h, every function uses `store` from the calling thread only.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/agent_rendezvous.h"
#include "launcher/report/job_report.h"
#include "libaccel/common/expected.h"
#include "libaccel/store/store.h"

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

  // The round it starts after round `round` (when it restarts).
  RoundStart next(int round) const { return {round + 1, restart_count, expect_machines}; }
};

// Records `mine` for round `round`. Throws accel::Error when the store cannot be reached.
void reportRoundEnd(store::Store& store, const GroupSettings& settings, int round,
                    const RoundEnd& mine);

// The master: the reports of round `round` once every one of the `machines` members either
// reported or is among `lostNow()` (the members found lost so far, asked every 100 ms while
// reports are missing; a member that reported and was then found lost counts once), or those
// that came within `timeout` (a machine whose agent died never reports). Ordered by arrival.
// Throws accel::Error when the store cannot be reached.
std::vector<RoundEnd> awaitRoundEnds(store::Store& store, const GroupSettings& settings, int round,
                                     int machines, std::chrono::milliseconds timeout,
                                     const std::function<std::vector<int>()>& lostNow = {});

// Publishes the round's decision unless one is there already (one compare-and-set: the first
// stands, when every agent decides); returns the round's decision as published. Throws
// accel::Error.
RoundDecision publishDecision(store::Store& store, const GroupSettings& settings, int round,
                              const RoundDecision& decision);

// The others: the master's decision for round `round`, waiting at most `timeout`. An error
// (never thrown) when it does not come or the store cannot be reached.
Expected<RoundDecision> readDecision(store::Store& store, const GroupSettings& settings, int round,
                                     std::chrono::milliseconds timeout);

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
  bool progress = false;               // some rank of the round completed a step
  std::optional<JobFailure> previous;  // the round before's first failure, if it failed
  bool previous_progress = false;
  std::vector<RoundEnd> ends;  // the reports that came
};

// The rule, in this order. Members that are lost, did not report, or (elastic jobs) stop are
// dropped; a static job ends when one would be, an elastic one when fewer than min_machines
// remain. A machine waiting to join re-forms the group without counting a restart. Otherwise
// no restart when no worker failed (an agent stopped, the master lost), when the budget is
// spent, or when the last two rounds failed the same way without progress (repeatedFailure)
// unless identical failures are retried; else a restart, counted.
RoundDecision decideNextRound(const RoundFacts& facts);

}  // namespace accel::launcher
