#include "launcher/rendezvous/round_end.h"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"

namespace accel::launcher {
namespace {

using nlohmann::json;

std::string machineText(const RoundEnd& e) {
  return "machine " + std::to_string(e.machine_rank) + " (" + e.host + ")";
}

std::string memberText(const RoundFacts& f, int m) {
  const auto at = static_cast<size_t>(m);
  return "machine " + std::to_string(m) +
         (at < f.hosts.size() && !f.hosts[at].empty() ? " (" + f.hosts[at] + ")" : "");
}

bool reported(const RoundFacts& f, int m) {
  return std::any_of(f.ends.begin(), f.ends.end(),
                     [m](const RoundEnd& e) { return e.machine_rank == m; });
}

// The members the next round goes on without, each with why: "machine 2 (h2) lost".
std::vector<std::pair<int, std::string>> droppedMembers(const RoundFacts& f) {
  std::vector<std::pair<int, std::string>> dropped;
  for (int m = 0; m < f.machines; ++m) {
    auto lost = std::find_if(f.lost.begin(), f.lost.end(),
                             [m](const LostMachine& l) { return l.machine == m; });
    if (lost != f.lost.end()) {
      dropped.emplace_back(m, memberText(f, m) + " lost (" + lost->how + ")");
    } else if (!reported(f, m)) {
      dropped.emplace_back(m, memberText(f, m) + " did not report the end of its workers");
    }
  }
  for (const auto& e : f.ends) {
    const bool already = std::any_of(dropped.begin(), dropped.end(),
                                     [&e](const auto& d) { return d.first == e.machine_rank; });
    if (!e.continues && !already) {
      dropped.emplace_back(e.machine_rank, machineText(e) + " stops: " + e.why_not);
    }
  }
  return dropped;
}

std::string joined(const std::vector<std::pair<int, std::string>>& dropped) {
  std::string out;
  for (const auto& d : dropped) out += (out.empty() ? "" : "; ") + d.second;
  return out;
}

// Whether the group can go on without `dropped`; the reason when it cannot.
std::optional<std::string> cannotGoOn(const RoundFacts& f,
                                      const std::vector<std::pair<int, std::string>>& dropped) {
  if (dropped.empty()) return std::nullopt;
  const int least = f.min_machines > 0 ? f.min_machines : f.machines;
  const int remaining = f.machines - static_cast<int>(dropped.size());
  if (!f.elastic) {
    return joined(dropped) + "; the job needs all " + std::to_string(f.machines) +
           " machines (--nnodes MIN:MAX lets a job go on with fewer)";
  }
  if (remaining >= least) return std::nullopt;
  return joined(dropped) + "; " + std::to_string(remaining) + " of the " + std::to_string(least) +
         " machines the job needs remain";
}

}  // namespace

void reportRoundEnd(store::Store& s, const GroupSettings& o, int round, const RoundEnd& mine) {
  const int slot = static_cast<int>(s.add(roundKeys(o, round).ends(), 1)) - 1;
  s.set(roundKeys(o, round).end(slot), json{{"machine_rank", mine.machine_rank},
                                            {"host", mine.host},
                                            {"continues", mine.continues},
                                            {"why_not", mine.why_not},
                                            {"progress", mine.progress}}
                                           .dump());
}

namespace {

// Report `slot`, counted, so its record follows at once (unless its agent died in between:
// nullopt, as for a malformed one).
std::optional<RoundEnd> readRoundEnd(store::Store& s, const GroupSettings& o, int round, int slot) {
  try {
    json j = json::parse(s.get(roundKeys(o, round).end(slot), o.timeouts.report_record));
    return RoundEnd{j.at("machine_rank").get<int>(), j.at("host").get<std::string>(),
                    j.at("continues").get<bool>(), j.at("why_not").get<std::string>(),
                    j.value("progress", false)};
  } catch (const TimeoutError&) {
  } catch (const json::exception&) {
  }
  return std::nullopt;
}

}  // namespace

std::vector<RoundEnd> awaitRoundEnds(store::Store& s, const GroupSettings& o, int round,
                                     int machines, std::chrono::milliseconds timeout,
                                     const std::function<std::vector<int>()>& lostNow) {
  const auto deadline = o.clock->now() + timeout;
  std::vector<RoundEnd> ends;
  int read = 0;  // report slots read so far
  while (true) {
    const int count = static_cast<int>(s.add(roundKeys(o, round).ends(), 0));
    for (; read < count; ++read) {
      if (auto end = readRoundEnd(s, o, round, read)) ends.push_back(*end);
    }
    std::set<int> accounted;  // reported or lost, each member once
    for (const auto& e : ends) accounted.insert(e.machine_rank);
    if (lostNow) {
      for (int m : lostNow()) accounted.insert(m);
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - o.clock->now());
    if (static_cast<int>(accounted.size()) >= machines || left.count() <= 0) break;
    try {  // the next report, or a moment to look at the lost machines again
      s.wait({roundKeys(o, round).end(count)}, std::min(left, o.timeouts.round_end_poll));
    } catch (const TimeoutError&) {
    }
  }
  return ends;
}

namespace {

json decisionToJson(const RoundDecision& d) {
  return {{"restart", d.restart},
          {"why", d.why},
          {"counted", d.counted},
          {"restart_count", d.restart_count},
          {"expect_machines", d.expect_machines}};
}

RoundDecision decisionFromJson(const json& j) {
  return RoundDecision{j.at("restart").get<bool>(), j.at("why").get<std::string>(),
                       j.at("counted").get<bool>(), j.at("restart_count").get<int>(),
                       j.at("expect_machines").get<int>()};
}

}  // namespace

RoundDecision publishDecision(store::Store& s, const GroupSettings& o, int round,
                              const RoundDecision& d) {
  const std::string stored =
      s.compareSet(roundKeys(o, round).decision(), "", decisionToJson(d).dump());
  try {
    return decisionFromJson(json::parse(stored));
  } catch (const json::exception& e) {
    throw Error(std::string("malformed restart decision in the store: ") + e.what());
  }
}

Expected<RoundDecision> readDecision(store::Store& s, const GroupSettings& o, int round,
                                     std::chrono::milliseconds timeout) {
  try {
    return decisionFromJson(json::parse(s.get(roundKeys(o, round).decision(), timeout)));
  } catch (const TimeoutError&) {
    return makeError("the master agent did not say within " + secondsText(timeout) +
                     " whether the job restarts");
  } catch (const Error& e) {
    return makeError(storeLost(o, e.what()));
  } catch (const json::exception& e) {
    return makeError(std::string("malformed restart decision in the store: ") + e.what());
  }
}

namespace {

std::string failureText(const RoundFacts& f, const JobFailure& failure) {
  return f.one_machine ? describeLocalFailure(failure) : describeFailure(failure);
}

// "restarting (1 of 3)" on one machine; with several, every machine restarts.
std::string restartingText(const RoundFacts& f) {
  const std::string count =
      std::to_string(f.restart_count + 1) + " of " + std::to_string(f.max_restarts);
  if (f.one_machine) return "restarting (" + count + ")";
  return "restarting every machine (" + count + " restarts, counted for the whole job)";
}

}  // namespace

RoundDecision decideNextRound(const RoundFacts& f) {
  const auto dropped = droppedMembers(f);
  if (auto why = cannotGoOn(f, dropped)) return {false, *why};
  const int most = f.max_machines > 0 ? f.max_machines : f.machines;
  const int expect = std::min(most, f.machines - static_cast<int>(dropped.size()) + f.waiting);
  if (f.joined)
    return {true, *f.joined + " (not counted as a restart)", false, f.restart_count, expect};
  if (!f.failure) return {false, "no failure of the attempt was published"};
  if (f.failure->rank < 0 && f.failure->cause.empty() && dropped.empty())
    return {false, failureText(f, *f.failure)};
  if (f.restart_count >= f.max_restarts) {
    if (f.max_restarts == 0 && !f.elastic) return {false, ""};  // no restart was asked for
    return {false, "the job's " + std::to_string(f.max_restarts) +
                       (f.max_restarts == 1 ? " restart is" : " restarts are") + " spent"};
  }
  if (f.previous && !f.retry_identical_failures && dropped.empty()) {
    if (auto why = repeatedFailure(f.round - 1, *f.previous, f.previous_progress, f.round,
                                   *f.failure, f.progress, failureText(f, *f.failure))) {
      return {false, *why + "; a restart would fail again (--retry_identical_failures retries)"};
    }
  }
  const std::string without = dropped.empty() ? "" : "; going on without " + joined(dropped);
  return {true,
          "attempt " + std::to_string(f.round) + " failed (" + failureText(f, *f.failure) + ")" +
              without + "; " + restartingText(f),
          true, f.restart_count + 1, expect};
}

}  // namespace accel::launcher
