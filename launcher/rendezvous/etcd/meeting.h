#pragma once
// meetOnEtcd: one round's meeting of a job's machines on etcd (issue 34), with no machine in
// charge of it, no counter that every agent fights over, and nothing that every agent reads or
// hears of every other (issue 52: what one agent costs etcd does not grow with the round).
//
// Each agent registers with one transaction under the round — a key of its own, attached to its
// lease, so an agent whose lease expires (its process or machine gone) leaves the round by
// itself — and etcd's create revision of that key is its arrival. Then one agent is the round's
// head: the one that creates the head's key (RoundKeys::head, attached to its lease). The head
// follows every registration through one watch and closes the round when it is complete, with one
// transaction that creates the round's record unless it exists: the members of the round before
// in their order (machine 0 stays machine 0 while it lives), then the others in arrival order, the
// first `max_machines` of them when more came. Complete is the rule of the master's store too
// (RoundClosing, round/closing.h): MAX registered (or the machines a re-forming group expects), or
// MIN registered and the last call (`last_call` after the head saw the MIN-th) ended. Every other
// agent watches only the record's keys (the record and the head's): a head that dies leaves with
// its lease, its key goes, and the waiting agents try to create it again — the one that does is
// the head. Any agent can carry the round, and the death of any one loses nothing.
//
// The record is a summary (the round's size, its world size, machines 0 and 1, the restart
// count), which every agent reads, and its members' places in chunks of 64, each named by the
// order of its last member ("0/<rank in the round before>" for a survivor, "1/<arrival>" for the
// others), so that an agent reads the one chunk that holds its own — the first at or after its
// order, which etcd finds in its index: its machine rank is its place there; a registered agent
// not in it is a spare.
//
// Requests per agent: one transaction (its registration, and a newcomer's mark), a read of the
// record, the head key's creation (again when a head dies), one watch, and its chunk's range — not
// growing with the number of agents; the head alone reads and hears every registration
// (scripts/bench/rdzv_scale.sh measures both).
//
// Blocking (at most `join` in all, or until the last call when MIN joined before it, or until
// settings.cancel_fd; each etcd call bounded by the client's timeout); uses
// `client` from the calling thread only. Throws accel::NetworkError when etcd cannot be reached
// and accel::Error when it refuses a request.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  // Its machine rank in the round before the one it registers for (-1: it was not a member).
  int previous_rank = -1;
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
  // The members this agent read, by machine rank from 0: every one when this agent closed the
  // round; else machine 0 and, in a round of two or more, machine 1 (what a placement needs).
  std::vector<EtcdMember> members;
  int size = 0;           // the round's machines
  int machine_rank = -1;  // this agent's; -1: a spare (the round was full)
  int rank_offset = 0;    // the global rank of its local rank 0
  int world_size = 0;     // processes over the round's machines
  int restart_count = 0;  // the round's TORCHELASTIC_RESTART_COUNT
  std::string closed;     // the job ended instead (why): no round, no members
  int64_t closed_at = 0;  // etcd's revision of the round's record
  // The revision of the registrations the record was made from: a registration that goes after
  // it is a member's or a spare's (the round's link watches from there).
  int64_t seen_at = 0;
  std::string places;  // where its members' places are (RoundKeys::placesBy its closer)
  int watches = 0;     // watches this agent opened (for benchmarks: requests)
  int checks = 0;      // reads of a watch's endpoint alone (for benchmarks: requests)
};

// A member's place in a closed round.
struct EtcdPlace {
  int machine_rank = -1;
  int rank_offset = 0;
  EtcdMember member;
};

// A registration's value: what an agent puts under RoundKeys::member (tests make rounds by hand).
std::string etcdRegistration(const EtcdMember& member);

// Writes a closed round's places under `places` (RoundKeys::placesBy its closer): `members` by
// machine rank (each a survivor by its previous_rank, else a newcomer by its registration's create
// revision, `arrivals`), in chunks of RoundKeys::kPlacesPerChunk named by the order of each
// chunk's last (etcd/meeting.h). Returns the round's world size. One put per chunk; throws as
// meetOnEtcd does.
int putEtcdPlaces(EtcdApi& client, const std::string& places,
                  const std::vector<EtcdMember>& members, const std::vector<int64_t>& arrivals);

// The place in the round whose places are under `places` (EtcdRound::places) of the agent whose
// registration is `registration` (its key, value and create revision, as it was); nullopt when
// that agent is no member (a spare, or it registered after the round closed). One or two range
// requests; throws as meetOnEtcd does.
std::optional<EtcdPlace> findEtcdPlace(EtcdApi& client, const std::string& places,
                                       const EtcdKeyValue& registration);

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
