#pragma once
// MachineGroup: the machines of one job, as the agent's one loop sees them, round by round.
//
// A round is one meeting of the machines and the attempt that follows it: meet() places this
// machine (a Placement: its ranks, the job's size, TORCHELASTIC_RESTART_COUNT), the supervisor
// runs the workers, and when the attempt failed, endRound() returns the one decision for the
// whole job — restart or not, and why — from the one restart rule (decideNextRound,
// round_end.h). The agent's loop (Supervisor::runRounds, supervise/supervisor.cc) is the same for
// every job:
//
//   meet → run the attempt → (failed) endRound → restart? meet again : stop
//
// Two implementations: SoloGroup (solo_group.h), the one machine of a job that has no other
// (nothing to meet, no store needed for it), and RoundGroup (round_group.h), one agent among
// several, written once over a RoundBackend: the master's store (c10d/store_rounds.h) or etcd
// (etcd/rounds.h). Every notice goes through the group's Notify callback, never to a console of
// its own.
//
// Every method is called from the agent's main thread; each may block on the job's store
// (bounded by the settings' timeouts); none throws.

#include <functional>
#include <string>

#include "launcher/plan/launch_plan.h"
#include "launcher/plan/placement.h"
#include "launcher/plan/round_timeouts.h"
#include "launcher/rendezvous/round_end.h"
#include "launcher/rendezvous/round_link.h"
#include "launcher/report/job_report.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

class StoreHost;  // store_host.h

// Where a group's notices go (the agent's console): one line each, without "accel: ".
using Notify = std::function<void(const std::string&)>;

class MachineGroup {
 public:
  virtual ~MachineGroup() = default;

  // Meets the other machines in the next round (round 0 first) and returns this machine's
  // placement in it. An error when the round cannot form, or when the job ended first
  // (jobClosed()).
  virtual Expected<Placement> meet() = 0;
  // The round meet() formed last: the attempt's number (attempt_K in the logs).
  virtual int round() const = 0;
  // The round's link to the other machines, for the supervisor (nullptr: there are none).
  virtual RoundLink* link() const = 0;
  // After the round's attempt failed: the job's decision (a restart, counted or not; or none,
  // with why, "" when there is nothing to say). Fills `last.job_failure` when the job's store
  // holds the round's first failure. `stopping`: this agent was told to stop (no restart).
  virtual RoundDecision endRound(AttemptReport& last, bool stopping) = 0;
  // The job ended (`why`): machines waiting to join a later round are told.
  virtual void closeJob(const std::string& why) = 0;
  // Ends the link's thread within a moment (RoundLink::stop), whatever the network does.
  virtual void stopLink() = 0;
  // The exit barrier: the agent that hosts the job's store keeps it up until the other
  // machines are done with it.
  virtual void awaitOtherMachines() = 0;
  // The job ended while this machine waited to join it (a spare): nothing to do.
  virtual bool jobClosed() const { return false; }
  // Makes a meet() blocked on the network return at once with an error (the agent was told to
  // stop meanwhile). The only method that may be called from another thread, while meet() runs.
  virtual void interrupt() {}
  // This machine's name, in the failures it publishes.
  virtual std::string host() const = 0;
  // Where the other machines' `accel status` answers are in the job's store ("": none).
  virtual std::string statusKeyPrefix() const = 0;
};

// Before round R > 0, the agent that hosts the job's store removes the workers' keys of the
// rounds before (torch 1.13 prefixed them per attempt, torch 2.x expects a fresh store); the
// agents' own keys ("/accel/...") stay. Every worker of the last round has ended. Returns how many
// were removed, silently (routine at every restart); says only a failure through `notify`.
size_t clearWorkerKeys(StoreHost& store, const Notify& notify);

// This machine's name (gethostname).
std::string thisHostName();

// A token that names one agent for the whole job, unique among agents: "host-pid-random" (the
// random part drawn under a lock: the tests run several agents in one process). Its presence key
// on the master's store, its registrations on etcd.
std::string agentToken(const std::string& host);

// "machine 1 of 3: ranks 2–3 of 6": where a round placed this machine, said once it formed.
std::string placedText(const Placement& placement, int localWorldSize);

// What the user asked of the group (the job's id, MIN:MAX, the restart budget, the processes per
// machine, the timeouts) and this machine's name, as either group starts from; the rest
// (address, store, presence, progress) is the group's own.
GroupSettings groupSettingsOf(const LaunchPlan& plan);

// Why this machine is not in round `round`, which closed with `roundSize` machines of at most
// `maxMachines`: the group is full (a spare until a member is lost), or the round closed just
// before (the group re-forms to take it).
std::string spareNotice(int round, int roundSize, int maxMachines);

}  // namespace accel::launcher
