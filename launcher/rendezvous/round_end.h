#pragma once
// The end of a failed round of a multi-machine job, and the one decision that follows it.
//
// A failure anywhere stops every machine's workers (c10d/job_link.h). Then, while the job's restart
// budget is not spent, every agent tells the master that its workers have all ended and whether
// it will take part in another round (an agent told to stop will not); the master waits for all
// of them, decides — restart or not, and why — for the whole job, and publishes the decision
// (the workers' keys are cleared from its store when the next round meets). The others wait for it.
// So the budget is the job's (one count, the same TORCHELASTIC_RESTART_COUNT on every machine), a
// failure seen by every machine is counted once, and no worker of the next round starts while one
// of the last round may still write to the store.
//
// As in c10d/rendezvous.h, every function uses `store` from the calling thread only.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/round/rules.h"
#include "launcher/rendezvous/round_records.h"
#include "libaccel/common/expected.h"
#include "libaccel/store/store.h"

namespace accel::launcher {

// Records `mine` for round `round`. Throws accel::Error when the store cannot be reached.
void reportRoundEnd(store::Store& store, const GroupSettings& settings, int round,
                    const RoundEnd& mine);

// The master: the reports of round `round` once every one of the `machines` members either
// reported or is among `lostNow()` (the members found lost so far, asked every 100 ms while
// reports are missing; a member that reported and was then found lost counts once), or those
// that came within `timeout` (a machine whose agent died never reports). Ordered by arrival;
// leaderless (settings.leaderless: reports by machine, no counter), by machine rank.
// Throws accel::Error when the store cannot be reached.
std::vector<RoundEnd> awaitRoundEnds(store::Store& store, const GroupSettings& settings, int round,
                                     int machines, std::chrono::milliseconds timeout,
                                     const std::function<std::vector<int>()>& lostNow = {});

// Publishes the round's decision unless one is there already (one compare-and-set: the first
// stands, when every agent decides); returns the round's decision as published. Throws
// accel::Error.
RoundDecision publishDecision(store::Store& store, const GroupSettings& settings, int round,
                              const RoundDecision& decision);

// Round `round`'s decision once published, waiting at most `timeout` (nullopt: not by then).
// Throws accel::Error when the store cannot be reached or the decision is malformed.
std::optional<RoundDecision> decisionWithin(store::Store& store, const GroupSettings& settings,
                                            int round, std::chrono::milliseconds timeout);

// The others: the master's decision for round `round`, waiting at most `timeout`. An error
// (never thrown) when it does not come or the store cannot be reached.
Expected<RoundDecision> readDecision(store::Store& store, const GroupSettings& settings, int round,
                                     std::chrono::milliseconds timeout);

}  // namespace accel::launcher
