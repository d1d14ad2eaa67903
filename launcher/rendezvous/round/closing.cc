#include "launcher/rendezvous/round/closing.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace accel::launcher {

RoundClosing::RoundClosing(int minMachines, int maxMachines, int expectMachines,
                           std::chrono::milliseconds lastCall)
    : least_(minMachines > 0 ? std::min(minMachines, maxMachines) : maxMachines),
      most_(maxMachines),
      expect_(expectMachines),
      last_call_(lastCall) {}

bool RoundClosing::ready(int count, time_point now) {
  if (count >= most_) return true;
  if (count < least_) {
    last_call_end_.reset();  // below MIN again: a later MIN starts a new last call
    return false;
  }
  if (expect_ > 0 && count >= expect_) return true;
  if (!last_call_end_) last_call_end_ = now + last_call_;
  return now >= *last_call_end_;
}

std::vector<size_t> rankMembers(const std::vector<Registrant>& registrants,
                                const std::map<std::string, int>& before, int machines) {
  std::vector<std::pair<std::pair<int, int64_t>, size_t>> ranked;  // ((group, order), index)
  for (size_t i = 0; i < registrants.size(); ++i) {
    const Registrant& r = registrants[i];
    auto was = before.find(r.token);
    if (r.asked_first) {
      ranked.push_back({{0, r.arrival}, i});
    } else if (was != before.end()) {
      ranked.push_back({{1, was->second}, i});
    } else {
      ranked.push_back({{2, r.arrival}, i});
    }
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<size_t> chosen;
  for (const auto& [order, index] : ranked) {
    if (static_cast<int>(chosen.size()) < machines) chosen.push_back(index);
  }
  return chosen;
}

namespace {

// Whole seconds, the nearest, but never "0 s" before the instant comes.
std::string secondsLeft(std::chrono::milliseconds left) {
  const auto ms = std::max<int64_t>(0, left.count());
  return std::to_string(ms > 0 ? std::max<int64_t>(1, (ms + 500) / 1000) : 0) + " s";
}

}  // namespace

std::map<std::string, int> ranksByToken(const nlohmann::json& members) {
  std::map<std::string, int> ranks;
  if (!members.is_array()) return ranks;
  int rank = 0;
  for (const auto& m : members) {
    if (m.is_object() && m.contains("token") && m["token"].is_string()) {
      ranks[m["token"].get<std::string>()] = rank;
    }
    ++rank;
  }
  return ranks;
}

std::string formingText(int here, int least, int most,
                        std::optional<std::chrono::milliseconds> lastCallLeft,
                        std::chrono::milliseconds joinLeft) {
  const std::string machines =
      std::to_string(here) + " of " +
      (least == most ? std::to_string(most) : std::to_string(least) + "–" + std::to_string(most)) +
      " machines";
  if (lastCallLeft) {
    return machines + "; the round closes in " + secondsLeft(*lastCallLeft) +
           " unless more come (the last call)";
  }
  // An agent that does not close the round itself (etcd's followers) knows MIN joined, not when.
  if (here >= least) return machines + "; the round closes at its last call unless more come";
  return machines + " (" + std::to_string(least) + " needed); " + secondsLeft(joinLeft) +
         " left to join (--rdzv_timeout)";
}

}  // namespace accel::launcher
