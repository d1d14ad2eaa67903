#pragma once
// Liveness: the one judgement of a round's group, on both backends, reported as group changes —
// a member lost (when, and how), a member that left, a machine waiting to join — from each
// backend's presence signal: on the master's store, whether a member's agent is present (its
// presence connection open: an agent whose process died is gone at once) and its keep-alive
// counter (one that did not move for keep_alive_interval x keep_alive_misses went silent: its
// machine or link is gone); on etcd, its registration gone with its lease. Either way, whether
// it said it finished before it went (then it left: no failure), and the registrations for the
// next round while the group has room (the group grows: no failure either).
//
// Pure: the caller reads its backend and passes the instant, so the rules are unit-tested in
// fake time (tests/launcher/rendezvous/liveness_test.cc); JobLink's and EtcdLink's threads
// drive it. Not thread-safe: one thread calls it.
//
// The other direction on the master's store, a member's view of the master, is keepWatchAlive's
// (c10d/job_link.h): TCP keep-alives on the connection each agent's failure watch waits on.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/plan/round_timeouts.h"
#include "launcher/rendezvous/round/rules.h"
#include "launcher/rendezvous/round/stop.h"

namespace accel::launcher {

// One change of a round's group.
struct GroupChange {
  enum class Kind {
    kLost,    // a member's agent is gone or silent: the round fails (cause kCauseLost)
    kLeft,    // a member went after it said it finished: nothing to do
    kJoined,  // a machine waits to join while the group has room: the group re-forms
  };
  Kind kind = Kind::kLost;
  int machine = -1;  // kLost, kLeft: the member; kJoined: -1 (no member yet)
  std::string how;   // kLost: how it was found; kJoined: why the group re-forms (growthReason)

  LostMachine lost() const { return {machine, how}; }
};

class Liveness {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // `machines` members (the job takes at most `maxMachines`), of which `self` is the master's
  // own machine (never judged); every keep-alive window starts at `start`.
  Liveness(int machines, int maxMachines, int self, const RoundTimeouts& timeouts,
           time_point start);

  // Member `machine`'s agent is present (true) or gone (false) now: gone is lost at once — or
  // left, when `finished` (asked only then) says it finished first. Each member changes once;
  // nullopt otherwise.
  std::optional<GroupChange> presence(int machine, bool present,
                                      const std::function<bool()>& finished);
  // Member `machine`'s presence is gone, as its backend says `how` ("its lease ended"): lost —
  // or left, when `finished` says it finished first. Once; nullopt otherwise.
  std::optional<GroupChange> gone(int machine, std::string how,
                                  const std::function<bool()>& finished);
  // Member `machine` was found lost by another judge (another machine's link, on etcd): judged
  // so here too, without a change to report. True the first time.
  bool lostElsewhere(int machine);
  // Member `machine`'s keep-alive counter read `count` at `now`: lost when it has not moved for
  // the window (left, when it finished). Once; nullopt otherwise.
  std::optional<GroupChange> keepAlive(int machine, int64_t count, time_point now,
                                       const std::function<bool()>& finished);
  // `registered` machines have registered for the next round by now: while the group has room,
  // the first is a machine joining (once; nullopt otherwise, and always when the group is full:
  // they wait as spares).
  std::optional<GroupChange> arrivals(int64_t registered);
  // Whether `machine` is still judged (not the master's own, not lost, not finished).
  bool watching(int machine) const;

  // "keep_alive_interval 1 s x keep_alive_max_attempt 3": what the window is made of.
  std::string windowText() const;

 private:
  enum class State { kWatched, kSelf, kLost, kFinished };
  GroupChange judge(int machine, std::string how, const std::function<bool()>& finished);

  const RoundTimeouts timeouts_;
  const int max_machines_;
  bool joined_ = false;  // an arrival was reported
  std::vector<State> state_;
  std::vector<int64_t> count_;     // the last keep-alive count seen (-1: none yet)
  std::vector<time_point> moved_;  // when it last moved (or the start)
};

}  // namespace accel::launcher
