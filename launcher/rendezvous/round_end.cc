#include "launcher/rendezvous/round_end.h"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"

namespace accel::launcher {

using nlohmann::json;

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

}  // namespace accel::launcher
