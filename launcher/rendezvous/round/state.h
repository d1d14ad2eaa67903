#pragma once
// The round's vocabulary, shared by every backend: what an agent's rounds are built from
// (GroupSettings: the user's settings, frozen, and who this agent is), what one round starts from
// (RoundStart: its number, the restart count, the machines it expects), and a round as it formed
// (RendezvousResult: its members by machine rank, this machine's place). Values only: no store,
// no etcd, no transport.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/plan/round_timeouts.h"

namespace accel::launcher {

class Clock;  // launcher/base/clock.h

// The clock of a group's rounds unless a test gives its own: a MonotonicClock.
std::shared_ptr<Clock> roundClock();

// What an agent's rounds are built from: what the user asked for (--rdzv_id, --nnodes MIN:MAX,
// --max_restarts, --rdzv_conf's timeouts: groupSettingsOf, machine_group.h) and who this agent is
// (added as it enters: StoreRounds::enter, EtcdRounds's constructor). Never changed after:
// what changes from round to round is a RoundStart.
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
  std::shared_ptr<Clock> clock = roundClock();

  // MIN as a number: the fewest machines a round closes with (min_machines, at most MAX; MAX when
  // unset). Every rule reads MIN through this.
  int leastMachines() const {
    return min_machines > 0 && min_machines < num_machines ? min_machines : num_machines;
  }
  // --nnodes MIN:MAX with MIN < MAX: machines may leave and join.
  bool elastic() const { return leastMachines() < num_machines; }
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

  // The round after this one when nothing was decided for it (a spare's next try, a group whose
  // end decided nothing): the same restart count, no machines expected.
  RoundStart following() const { return {round + 1, restart_count, 0}; }
};

struct MachineInfo {
  std::string host;
  std::string presence;  // its agent's presence key
  std::string address;   // the address it reached the master from (its route's source address)
  int local_world_size = 0;
  int machine_rank = 0;
  int rank_offset = 0;  // global rank of its local rank 0
  int store_port = 0;   // etcd: its agent's store, the workers' when it is a round's machine 0
};

struct RendezvousResult {
  int machine_rank = 0;
  int rank_offset = 0;
  int world_size = 0;
  int max_restarts = 0;   // the job's (the master's)
  int restart_count = 0;  // the round's TORCHELASTIC_RESTART_COUNT
  int size = 0;           // how many machines the round has
  // By machine rank, as far as this agent knows them: every member on the master of the store's
  // round and on etcd; machine 0 alone on the store's other agents (each reads its own place,
  // not the whole list: a round's bytes per machine do not grow with the round).
  std::vector<MachineInfo> machines;
  bool spare = false;  // the round closed without this machine: it waits for the next
  int round_size = 0;  // a spare's: how many machines the round closed with
  std::string closed;  // not empty: the job ended before this round formed (why)
};

}  // namespace accel::launcher
