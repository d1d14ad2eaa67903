#pragma once
// Rendezvous of the agents of a multi-machine job, through the master agent's store.
//
// A job meets in rounds: round 0 starts it, and each restart is a new round, whose keys live
// apart (accel/rdzv/<run_id>/round/<R>/...; run_id: --rdzv_id), so nothing of an earlier round is
// read again. In each round every agent registers (host, local world size, requested machine rank)
// under a slot it gets from one atomic add. The master agent (requested machine rank 0, the store's
// host) waits until the round may close (RoundClosing, round_closing.h: MAX, or the machines a
// re-forming group expects, else the last call after MIN), assigns machine ranks (requested ones
// honoured; then the members of the round before, in their order, as on etcd; the rest in arrival
// order, beyond MAX spares) and global rank offsets in one pass, and publishes them with one write;
// the others wait for that key. After the job, every agent reports in an exit barrier so
// the master keeps the store up until the last machine is done.
//
// Every function here uses `store` from the calling thread only, for its whole call: a store
// client is not thread-safe, so no other thread may use the same client meanwhile.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/base/clock.h"
#include "launcher/plan/round_timeouts.h"
#include "launcher/rendezvous/job_keys.h"
#include "launcher/rendezvous/round_closing.h"
#include "launcher/rendezvous/round_stop.h"
#include "launcher/report/job_report.h"
#include "libaccel/common/expected.h"
#include "libaccel/store/store.h"

namespace accel::launcher {

// What an agent's rounds are built from: what the user asked for (--rdzv_id, --nnodes MIN:MAX,
// --max_restarts, --rdzv_conf's timeouts) and who this agent is. Made once, when the agent has
// reached the job's store (StoreGroup::connect), and never changed: what changes from round to
// round is a RoundStart.
struct GroupSettings {
  std::string run_id = "none";  // the job's id (--rdzv_id): its keys are accel/rdzv/<run_id>/...
  int num_machines = 1;         // MAX: the most machines a round takes
  int min_machines = 0;         // MIN (0: num_machines): the fewest a round closes with
  // The master's restart budget, published with its assignment: the job's, whatever the other
  // machines' command lines say.
  int max_restarts = 0;
  bool retry_identical_failures = false;      // --retry_identical_failures (the master's counts)
  std::optional<int> requested_machine_rank;  // nullopt: any; 0 makes this agent the master
  int local_world_size = 1;
  std::string host;           // this machine's name, for messages
  std::string address;        // this machine's address as seen on the way to the master
  std::string store_address;  // "host:port" of the store, for messages
  // Rounds on etcd: no agent hosts the store or decides alone (every agent decides, the first
  // decision published stands), and store_address names etcd's endpoints.
  bool leaderless = false;
  RoundTimeouts timeouts;  // join bounds the rendezvous; progress paces its notices
  // This agent's presence key (JobKeys::presence): it keeps a WAIT parked on it, on a connection of
  // its own, for as long as it lives; registered with it, so the master can tell which
  // registered agents are still there.
  std::string presence;
  // The master's view of the presence keys (the store is its own): whether the agent of a
  // registration is still connected. Unset: every registered agent counts.
  std::function<bool(const std::string& presence)> present;
  // Called by the master only, on the thread that runs rendezvous(), every timeouts.progress
  // while machines are missing: "3/4 machines joined; waiting for machine_rank 2".
  std::function<void(const std::string&)> progress;
  // The time of every deadline and pause of the rounds' rules (a simulated one in the tests:
  // tests/launcher/rendezvous/sim_world.h); the store's own waits are the store's.
  std::shared_ptr<Clock> clock = std::make_shared<MonotonicClock>();

  // --nnodes MIN:MAX with MIN < MAX: machines may leave and join.
  bool elastic() const { return min_machines > 0 && min_machines < num_machines; }
};

// What one round starts from, as the round before decided it (RoundDecision::next; round 0: the
// job's start): its number, the restart count its workers see, and how many machines the master
// waits for before closing it at once.
struct RoundStart {
  int round = 0;          // 0, then one more per restart or change of the group
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT of the round's workers (the master's)
  // A re-forming group knows who survived: the round closes at once when this many joined
  // (0: unknown), else timeouts.last_call after min_machines did. Later arrivals are spares.
  int expect_machines = 0;
};

struct MachineInfo {
  std::string host;
  std::string presence;  // its agent's presence key
  std::string address;   // the address it reached the master from (its route's source address)
  int local_world_size = 0;
  int machine_rank = 0;
  int rank_offset = 0;  // global rank of its local rank 0
};

struct RendezvousResult {
  int machine_rank = 0;
  int rank_offset = 0;
  int world_size = 0;
  int max_restarts = 0;               // the job's (the master's)
  int restart_count = 0;              // the round's TORCHELASTIC_RESTART_COUNT
  std::vector<MachineInfo> machines;  // by machine rank
  bool spare = false;  // the round closed without this machine: it waits for the next
  int round_size = 0;  // a spare's: how many machines the round closed with
  std::string closed;  // not empty: the job ended before this round formed (why)
};

// The master's rule for when round `start` may close (round_closing.h), from the settings.
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

// The keys of the job settings.run_id, and of its round `round` (job_keys.h).
inline JobKeys jobKeys(const GroupSettings& settings) { return JobKeys(settings.run_id); }
inline RoundKeys roundKeys(const GroupSettings& settings, int round) {
  return jobKeys(settings).round(round);
}

// Why a machine stops when the store the rounds meet in is gone (`why`: what its client said):
// the master's store, the job's one point of failure, whichever wait noticed it; or etcd
// (settings.leaderless), which has no master.
std::string storeLost(const GroupSettings& settings, const std::string& why);

// Publishes `mine` as round `round`'s stop record (round_stop.h) unless one is there already
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
// throws. A non-master returns after one round trip. The master polls the store every 20 ms and
// calls `othersGone` (on the calling thread) each time; with `othersGone` empty and no failure, it
// waits for every machine without a time limit. A master still waiting after the settings'
// exit_notice says so once through `say` (on the calling thread): how many finished, and how
// long it may still wait — so that an agent is never silent between its summary and its exit.
int exitBarrier(store::Store& store, const GroupSettings& settings, int round, int machines,
                bool master, std::chrono::milliseconds afterFailure,
                const std::function<bool()>& othersGone,
                const std::function<void(const std::string&)>& say = {});

}  // namespace accel::launcher
