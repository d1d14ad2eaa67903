#include "launcher/rendezvous/round/stop.h"

#include <nlohmann/json.hpp>

namespace accel::launcher {

// A failure is stored as JobFailure's own record; the group's growth under a key of its own.
std::string encodeRoundStop(const RoundStop& stop) {
  if (stop.failure) return failureToJson(*stop.failure).dump();
  nlohmann::json j = {{"group_grows", stop.grows}};
  if (stop.excluded >= 0) j["excluded_machine"] = stop.excluded;
  return j.dump();
}

RoundStop decodeRoundStop(const std::string& record) {
  const auto j = nlohmann::json::parse(record);
  if (j.is_object() && j.contains("group_grows")) {
    return RoundStop::excluding(j.value("excluded_machine", -1),
                                j.at("group_grows").get<std::string>());
  }
  return RoundStop::failed(failureFromJson(j));
}

JobFailure lostFailure(const LostMachine& machine, const std::string& host,
                       const std::string& detail) {
  JobFailure lost;
  lost.machine_rank = machine.machine;
  lost.host = host;
  lost.cause = kCauseLost;
  lost.reason = "lost: " + machine.how + (detail.empty() ? "" : " (" + detail + ")");
  return lost;
}

std::string growthReason(int machines, int maxMachines) {
  return "a machine is waiting to join (the group has " + std::to_string(machines) +
         " of at most " + std::to_string(maxMachines) + "): the group re-forms to take it";
}

}  // namespace accel::launcher
