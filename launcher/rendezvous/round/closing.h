#pragma once
// RoundClosing: the rule for when a forming round may close, the same on the master's store
// (awaitMachines, c10d/rendezvous.cc) and on etcd (meetOnEtcd, etcd/meeting.cc): at once with MAX
// machines (or, for a re-forming group, the machines it expects), else `last_call` after MIN
// joined — the last call starts at the first look that sees MIN and starts again should the
// group fall below MIN meanwhile (torch's dynamic rendezvous does the same). Pure: the caller
// passes the count and the instant, so it is unit-tested in fake time (liveness_test.cc). Not
// thread-safe: one thread looks.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace accel::launcher {

class RoundClosing {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // A round of `minMachines` (0: all) to `maxMachines` that expects `expectMachines` (0: none).
  RoundClosing(int minMachines, int maxMachines, int expectMachines,
               std::chrono::milliseconds lastCall);

  // With `count` machines joined at `now`: whether the round may close.
  bool ready(int count, time_point now);
  // When the current last call ends (nullopt: MIN has not joined).
  std::optional<time_point> lastCallEnd() const { return last_call_end_; }
  // MIN (0 given: all) and MAX, as the rule counts them.
  int least() const { return least_; }
  int most() const { return most_; }

 private:
  const int least_, most_, expect_;
  const std::chrono::milliseconds last_call_;
  std::optional<time_point> last_call_end_;
};

// What a forming round waits for, said every few seconds on both backends: "1 of 1–2 machines;
// the round closes in 27 s unless more come (the last call)" once MIN joined (`lastCallLeft`),
// else "1 of 2–3 machines (2 needed); 590 s left to join (--rdzv_timeout)"; MIN joined with no
// `lastCallLeft` (an agent that does not close the round): "...; the round closes at its last
// call unless more come". `least`..`most`: MIN..MAX (equal: a fixed size).
std::string formingText(int here, int least, int most,
                        std::optional<std::chrono::milliseconds> lastCallLeft,
                        std::chrono::milliseconds joinLeft);

// One agent registered for a round, as the rule that ranks the round's machines sees it.
struct Registrant {
  std::string token;         // its agent's, the same in every round
  int64_t arrival = 0;       // its registration's order
  bool asked_first = false;  // it asked to be machine 0 (the master's store's host)
};

// The round's members among `registrants`, `machines` at most, by machine rank: any that asked to
// be first, then the members of the round before in their order there (`before`: machine rank
// by token), then the others by arrival. Those left out are spares. Returns indices into
// `registrants`. The one rule of both stores (c10d/rendezvous.cc, etcd/meeting.cc): machine 0
// stays machine 0 while it lives, a survivor keeps its place, a newcomer follows.
std::vector<size_t> rankMembers(const std::vector<Registrant>& registrants,
                                const std::map<std::string, int>& before, int machines);

// The machine ranks of a formed round's members by token — rankMembers' `before` for the round
// after — from its member list as both backends keep it: a JSON array in machine-rank order,
// each member an object with its agent's "token". Anything else (a round that never formed, a
// value some other program wrote) gives none: the next round then ranks by arrival.
std::map<std::string, int> ranksByToken(const nlohmann::json& members);

}  // namespace accel::launcher
