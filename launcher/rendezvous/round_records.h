#pragma once
// A round's records in any Store (the master's TCP store, or etcd through EtcdStore), shared by
// every backend: the job's and the round's keys (keys.h), the round's one stop record
// (publishStop, readStop), the exit barrier, and what to say when the store is gone.
//
// Every function here uses `store` from the calling thread only, for its whole call: a store
// client is not thread-safe, so no other thread may use the same client meanwhile.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "launcher/base/clock.h"
#include "launcher/rendezvous/round/keys.h"
#include "launcher/rendezvous/round/state.h"
#include "launcher/rendezvous/round/stop.h"
#include "libaccel/store/store.h"

namespace accel::launcher {

// The keys of the job settings.run_id, and of its round `round` (round/keys.h).
inline JobKeys jobKeys(const GroupSettings& settings) { return JobKeys(settings.run_id); }
inline RoundKeys roundKeys(const GroupSettings& settings, int round) {
  return jobKeys(settings).round(round);
}

// Why a machine stops when the store the rounds meet in is gone (`why`: what its client said):
// the master's store, the job's one point of failure, whichever wait noticed it; or etcd
// (settings.leaderless), which has no master. `mayComeBack`: this machine tries to reach the
// master's store again (a non-master of an elastic job: RoundGroup::comeBack).
std::string storeLost(const GroupSettings& settings, const std::string& why,
                      bool mayComeBack = false);

// Publishes `mine` as round `round`'s stop record (round/stop.h) unless one is there already
// (one compare-and-set, so exactly one machine's failure — or loss, or the group's growth — stops
// the round). Returns the record that stands when it is not `mine`, nullopt when it is (or the
// store cannot be reached: then nobody else can be told either). Blocks for one round trip to the
// store, bounded only by the store client's own timeout; never throws.
std::optional<RoundStop> publishStop(store::Store& store, const GroupSettings& settings, int round,
                                     const RoundStop& mine);

// Reads round `round`'s stop record; nullopt when it is `machineRank`'s own failure (not when it
// says the master found this machine lost). Blocks until the stop key exists, at most 30 s (call it
// once the key is known to exist, e.g. after a watch fired). Throws accel::Error when the store
// cannot be read (accel::TimeoutError when no failure was published within 30 s),
// nlohmann::json::exception when the record is malformed.
std::optional<RoundStop> readStop(store::Store& store, const GroupSettings& settings, int round,
                                  int machineRank);

// The exit barrier of round `round`, which has `machines` members: records that this machine's
// workers are done; the master then waits until every machine has, or until `othersGone()` says no
// other agent is connected any more (one that died never reports, one that left needs the store no
// more), or, once a failure was published, `afterFailure` has passed (the others only need the
// store to read it). Returns how many finished, or -1 when the store cannot be reached; never
// throws. A non-master returns after one round trip (its count is of the non-masters that reported
// so far: the master counts itself without a call). The master polls the store every 20 ms (a
// poll its store did not answer in time is polled again, not the barrier's end) and
// calls `othersGone` (on the calling thread) each time; with `othersGone` empty and no failure, it
// waits for every machine without a time limit. A master still waiting after the settings'
// exit_notice says so once through `say` (on the calling thread): how many finished, and how
// long it may still wait — so that an agent is never silent between its summary and its exit.
int exitBarrier(store::Store& store, const GroupSettings& settings, int round, int machines,
                bool master, std::chrono::milliseconds afterFailure,
                const std::function<bool()>& othersGone,
                const std::function<void(const std::string&)>& say = {});

// This machine (`machineRank` of round `round`'s `machines`) leaves the round, the same on both
// backends: it says it finished (RoundKeys::finished, so that its agent's going is judged left,
// not lost), then the exit barrier (exitBarrier; `host`: this agent hosts the workers' store, and
// waits for the others). The host says so through `say` when it stops the store before every
// machine reported. `machineRank` -1: a spare, never a member, which says nothing finished.
// Returns exitBarrier's count; never throws.
int leaveRound(store::Store& store, const GroupSettings& settings, int round, int machineRank,
               int machines, bool host, const std::function<bool()>& othersGone,
               const std::function<void(const std::string&)>& say);

}  // namespace accel::launcher
