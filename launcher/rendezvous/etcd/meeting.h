#pragma once
// meetOnEtcd: one round's meeting of a job's machines on etcd (issue 34), with no machine in
// charge of it and no counter that every agent fights over.
//
// Each agent registers with one put under the round — a key of its own, attached to its lease,
// so an agent whose lease expires (its process or machine gone) leaves the round by itself — and
// etcd's create revision of that key is its arrival. Every agent then follows the round's keys
// through one watch (from the revision of one read, so it misses nothing), and whichever agent
// first sees the round complete closes it with one transaction that creates the round's record
// unless it exists: the members of the round before in their order (machine 0 stays machine 0
// while it lives), then the others in arrival order, the first `max_machines` of them when more
// came. Complete is the rule of the master's store too (RoundClosing, round/closing.h): MAX
// registered (or the machines a re-forming group expects), or MIN registered and the last call
// (`last_call` after this agent saw the MIN-th) ended. So any agent can carry the round, the death
// of any one loses nothing, and every agent reads the same record: its machine rank is its place
// there, machine 0 the first in it; a registered agent not in it is a spare.
//
// Requests per agent: a put, a read, the watch, a transaction or a read of the record (and a
// read and a watch again when an endpoint fails) — not growing with the number of agents, where
// the rounds' rules over a Store (c10d/rendezvous.h on EtcdStore) fight over one counter and
// grow with it (scripts/bench/rdzv_store.sh).
//
// Blocking (at most `join` in all, or until the last call when MIN joined before it, or until
// settings.cancel_fd; each etcd call bounded by the client's timeout); uses
// `client` from the calling thread only. Throws accel::NetworkError when etcd cannot be reached
// and accel::Error when it refuses a request.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/plan/round_timeouts.h"
#include "launcher/rendezvous/etcd/client/etcd_client.h"
#include "launcher/rendezvous/round/keys.h"
#include "launcher/rendezvous/round/state.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// One agent as its registration says.
struct EtcdMember {
  std::string token;    // unique to the agent (host-pid-random)
  std::string host;     // for messages
  std::string address;  // where the other machines reach it ("": unknown)
  int local_world_size = 1;
  int store_port = 0;  // its agent's store: the workers' when it is a round's machine 0
  bool operator==(const EtcdMember& o) const {
    return token == o.token && host == o.host && address == o.address &&
           local_world_size == o.local_world_size && store_port == o.store_port;
  }
};

// One agent's meeting on etcd: its job's GroupSettings — the same value the store's rounds take:
// the run id, MIN (leastMachines) and MAX (num_machines), the timeouts (join and last_call bound
// the round; a watch silent for keep_alive_interval is checked: its endpoint must answer a quorum
// read, else the round is read and watched elsewhere), the clock of the meeting's time and waits,
// and the progress notices (every timeouts.progress while the round forms: formingText) — and
// what only etcd needs.
struct EtcdMeeting {
  GroupSettings job;
  std::string root;   // the job's keys in etcd: JobKeys(job.run_id, root) (round/keys.h)
  int64_t lease = 0;  // the agent's lease: its registration goes when it expires
  // Readable once the agent was told to stop (-1: never): meetOnEtcd returns an error at that
  // instant, however long the round would take to form. The caller's descriptor.
  int cancel_fd = -1;
};

struct EtcdRound {
  std::vector<EtcdMember> members;  // the round's machines, by machine rank (arrival)
  int machine_rank = -1;            // this agent's; -1: a spare (the round was full)
  int rank_offset = 0;              // the global rank of its local rank 0
  int world_size = 0;               // processes over the round's machines
  int restart_count = 0;            // the round's TORCHELASTIC_RESTART_COUNT
  std::string closed;               // the job ended instead (why): no round, no members
  int64_t closed_at = 0;            // etcd's revision of the round's record
  int watches = 0;                  // watches this agent opened (for benchmarks: requests)
};

// Round `round`'s keys in etcd (round/keys.h's under meeting.root).
RoundKeys etcdRoundKeys(const EtcdMeeting& meeting, int round);

// Ends the job for the agents waiting in round `round` (spares): its record names no member
// and says `why`, unless the round closed first. Throws as meetOnEtcd does.
void closeEtcdRound(EtcdApi& client, const EtcdMeeting& meeting, int round, const std::string& why);

// Registers `me` for round `start.round` and returns the round once it closed — as soon as
// start.expect_machines registered when set (a restart's survivors do not wait for a last call);
// start.restart_count is what the record says when this agent closes the round. An error naming
// the round, etcd's endpoint and who joined when fewer than MIN did within timeouts.join.
Expected<EtcdRound> meetOnEtcd(EtcdApi& client, const EtcdMeeting& meeting, const RoundStart& start,
                               const EtcdMember& me);

}  // namespace accel::launcher
