#pragma once
// Rendezvous of the agents of a multi-machine job, through the master agent's store.
//
// A job meets in rounds: round 0 starts it, and each restart is a new round, whose keys live
// apart (accel/rdzv/<run_id>/round/<R>/...; run_id: --rdzv_id), so nothing of an earlier round is
// read again. In each round every agent registers (host, local world size, requested machine rank)
// under a slot it gets from one atomic add. The master agent (requested machine rank 0, the store's
// host) waits until the round may close (RoundClosing, round/closing.h: MAX, or the machines a
// re-forming group expects, else the last call after MIN), assigns machine ranks (requested ones
// honoured; then the members of the round before, in their order, as on etcd; the rest in arrival
// order, beyond MAX spares) and global rank offsets in one pass, and publishes them: the whole
// list for itself (`members`), the registration slots' places in chunks of 64, then a summary
// (the round's size, machine 0, the restart count) that the others wait for — each reads the
// summary and its own chunk, so what an agent reads does not grow with the round. After the job,
// every agent reports in an exit barrier so the master keeps the store up until the last machine is
// done.
//
// Every function here uses `store` from the calling thread only, for its whole call: a store
// client is not thread-safe, so no other thread may use the same client meanwhile.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/round/closing.h"
#include "launcher/rendezvous/round/state.h"
#include "launcher/rendezvous/round_records.h"
#include "libaccel/common/expected.h"
#include "libaccel/store/store.h"

namespace accel::launcher {

// The master's rule for when round `start` may close (round/closing.h), from the settings.
RoundClosing roundClosing(const GroupSettings& settings, const RoundStart& start);

// Joins the rendezvous. Blocks until the round closes (RoundClosing; once MIN joined, at the last
// call even past the timeout) or the timeout (an agent other than
// the master waits 2 s longer, so that the master's reason for giving up reaches it); the error
// names what is missing ("timed out after 900 s: 3/4 machines joined; waiting for machine_rank
// 2"). Store failures (the master unreachable) and malformed records are errors naming the
// store's address; nothing is thrown.
Expected<RendezvousResult> rendezvous(store::Store& store, const GroupSettings& settings,
                                      const RoundStart& start);

// How many machines registered for round `round` so far whose agents are still there
// (GroupSettings::present; without it, every registration): one that registered and died is not
// waited for. Throws accel::Error when the store cannot be reached.
int presentRegistrations(store::Store& store, const GroupSettings& settings, int round);
// Whether the agent of round `round`'s registration `slot` (counted already) is still there, as
// presentRegistrations judges it. Throws accel::Error when the store cannot be reached, and when
// the record is malformed.
bool registrationPresent(store::Store& store, const GroupSettings& settings, int round, int slot);

// The round the master opened last (it writes it before registering in each round): where a
// machine that arrives while the job runs joins. Throws accel::Error (TimeoutError when the
// master opened none within `timeout`).
int openRound(store::Store& store, const GroupSettings& settings,
              std::chrono::milliseconds timeout);
// The master, when the job ends: `round` (the one after the last) will never form; its waiting
// spares read `why` instead of an assignment. Throws accel::Error.
void closeRound(store::Store& store, const GroupSettings& settings, int round,
                const std::string& why);

}  // namespace accel::launcher
