#include "launcher/rendezvous/round_end.h"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"

namespace accel::launcher {

using nlohmann::json;

// Leaderless (etcd), where a counter is a compare-and-swap that every other writer makes lose:
// a key per machine. Else a slot from the counter (the master reads them in arrival order).
void reportRoundEnd(store::Store& s, const GroupSettings& o, int round, const RoundEnd& mine) {
  const RoundKeys keys = roundKeys(o, round);
  const std::string key = o.leaderless ? keys.endOf(mine.machine_rank)
                                       : keys.end(static_cast<int>(s.add(keys.ends(), 1)) - 1);
  s.set(key, json{{"machine_rank", mine.machine_rank},
                  {"host", mine.host},
                  {"continues", mine.continues},
                  {"why_not", mine.why_not},
                  {"progress", mine.progress}}
                 .dump());
}

namespace {

// A report as stored; nullopt when malformed.
std::optional<RoundEnd> parseRoundEnd(const std::string& stored) {
  try {
    json j = json::parse(stored);
    return RoundEnd{j.at("machine_rank").get<int>(), j.at("host").get<std::string>(),
                    j.at("continues").get<bool>(), j.at("why_not").get<std::string>(),
                    j.value("progress", false)};
  } catch (const json::exception&) {
  }
  return std::nullopt;
}

// A report (its slot, counted), so its record is there (unless its agent died in between:
// nullopt, as for a malformed one).
std::optional<RoundEnd> readRoundEnd(store::Store& s, const GroupSettings& o,
                                     const std::string& key) {
  try {
    return parseRoundEnd(s.get(key, o.timeouts.report_record));
  } catch (const TimeoutError&) {
  }
  return std::nullopt;
}

// Leaderless: the reports of the members not found lost, read together (one request for many on
// etcd) until every one is in; between reads, the first still missing is awaited (at most
// round_end_poll: the lost machines are looked at again). Those read are not read again.
std::vector<RoundEnd> awaitEndsByMachine(store::Store& s, const GroupSettings& o, int round,
                                         int machines, Clock::time_point deadline,
                                         const std::function<std::vector<int>()>& lostNow) {
  const RoundKeys keys = roundKeys(o, round);
  std::vector<RoundEnd> ends;
  std::vector<int> missing(static_cast<size_t>(machines));
  for (int m = 0; m < machines; ++m) missing[static_cast<size_t>(m)] = m;
  while (true) {
    const auto lost = lostNow ? lostNow() : std::vector<int>{};
    std::vector<std::string> wanted;
    std::vector<int> of;
    for (int m : missing) {
      if (std::find(lost.begin(), lost.end(), m) == lost.end()) {
        wanted.push_back(keys.endOf(m));
        of.push_back(m);
      }
    }
    missing.clear();
    const auto values = s.present(wanted);
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i]) {
        missing.push_back(of[i]);
      } else if (auto end = parseRoundEnd(*values[i])) {
        ends.push_back(*end);
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - o.clock->now());
    if (missing.empty() || left.count() <= 0) return ends;
    try {
      s.wait({keys.endOf(missing.front())}, std::min(left, o.timeouts.round_end_poll));
    } catch (const TimeoutError&) {
    }
  }
}

}  // namespace

std::vector<RoundEnd> awaitRoundEnds(store::Store& s, const GroupSettings& o, int round,
                                     int machines, std::chrono::milliseconds timeout,
                                     const std::function<std::vector<int>()>& lostNow) {
  const auto deadline = o.clock->now() + timeout;
  if (o.leaderless) return awaitEndsByMachine(s, o, round, machines, deadline, lostNow);
  std::vector<RoundEnd> ends;
  int read = 0;  // report slots read so far
  while (true) {
    const int count = static_cast<int>(s.add(roundKeys(o, round).ends(), 0));
    for (; read < count; ++read) {
      if (auto end = readRoundEnd(s, o, roundKeys(o, round).end(read))) ends.push_back(*end);
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
          {"expect_machines", d.expect_machines},
          {"progress", d.progress}};
}

RoundDecision decisionFromJson(const json& j) {
  return RoundDecision{j.at("restart").get<bool>(),        j.at("why").get<std::string>(),
                       j.at("counted").get<bool>(),        j.at("restart_count").get<int>(),
                       j.at("expect_machines").get<int>(), j.value("progress", false)};
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

std::optional<RoundDecision> decisionWithin(store::Store& s, const GroupSettings& o, int round,
                                            std::chrono::milliseconds timeout) {
  std::string stored;
  try {
    stored = s.get(roundKeys(o, round).decision(), timeout);
  } catch (const TimeoutError&) {
    return std::nullopt;
  }
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

}  // namespace accel::launcher
