#include "launcher/rendezvous/agent_rendezvous.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"

namespace accel::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string prefix(const RendezvousOptions& o) {
  return std::string(kAgentKeyPrefix) + "rdzv/" + o.run_id + "/";
}

std::string list(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

// Reads the registrations of slots [0, count).
std::vector<json> registrations(store::Store& s, const RendezvousOptions& o, int count) {
  std::vector<json> out;
  for (int slot = 0; slot < count; ++slot) {
    out.push_back(
        json::parse(s.get(prefix(o) + "agent/" + std::to_string(slot), std::chrono::seconds(30))));
  }
  return out;
}

std::string missingText(const std::vector<json>& joined, int machines) {
  std::set<int> requested;
  int anyRank = 0;
  for (const auto& j : joined) {
    int r = j.at("requested_rank").get<int>();
    if (r >= 0)
      requested.insert(r);
    else
      ++anyRank;
  }
  std::vector<int> missing;
  for (int r = 0; r < machines; ++r) {
    if (!requested.count(r)) missing.push_back(r);
  }
  if (anyRank > 0 || missing.empty()) return "";
  return "; waiting for machine_rank " + list(missing);
}

struct Assignment {
  std::vector<MachineInfo> machines;  // by machine rank
  std::vector<int> slot_rank;         // registration slot → machine rank
};

// The master's single pass: honour requested ranks, give the rest out in arrival order.
Expected<Assignment> assign(const std::vector<json>& joined, int machines) {
  std::vector<MachineInfo> byRank(static_cast<size_t>(machines));
  std::vector<bool> taken(static_cast<size_t>(machines), false);
  std::vector<int> slotRank(joined.size(), -1);
  for (size_t slot = 0; slot < joined.size(); ++slot) {
    int r = joined[slot].at("requested_rank").get<int>();
    if (r < 0) continue;
    if (r >= machines) {
      return makeError("machine " + joined[slot].at("host").get<std::string>() +
                       " asked for machine_rank " + std::to_string(r) + " but num_machines is " +
                       std::to_string(machines));
    }
    if (taken[static_cast<size_t>(r)]) {
      return makeError("two machines asked for machine_rank " + std::to_string(r) + " (" +
                       byRank[static_cast<size_t>(r)].host + " and " +
                       joined[slot].at("host").get<std::string>() + ")");
    }
    taken[static_cast<size_t>(r)] = true;
    slotRank[slot] = r;
    byRank[static_cast<size_t>(r)].host = joined[slot].at("host").get<std::string>();
  }
  int next = 0;
  for (size_t slot = 0; slot < joined.size(); ++slot) {
    if (slotRank[slot] >= 0) continue;
    while (taken[static_cast<size_t>(next)]) ++next;
    taken[static_cast<size_t>(next)] = true;
    slotRank[slot] = next;
  }
  for (size_t slot = 0; slot < joined.size(); ++slot) {
    MachineInfo& m = byRank[static_cast<size_t>(slotRank[slot])];
    m.host = joined[slot].at("host").get<std::string>();
    m.address = joined[slot].value("address", "");
    m.local_world_size = joined[slot].at("local_world_size").get<int>();
    m.machine_rank = slotRank[slot];
  }
  int offset = 0;
  for (auto& m : byRank) {
    m.rank_offset = offset;
    offset += m.local_world_size;
  }
  return Assignment{byRank, slotRank};
}

// Registers this agent under the next free slot (one atomic add); returns the slot.
int registerAgent(store::Store& s, const RendezvousOptions& o) {
  const int slot = static_cast<int>(s.add(prefix(o) + "arrivals", 1)) - 1;
  s.set(prefix(o) + "agent/" + std::to_string(slot),
        json{{"host", o.host},
             {"address", o.address},
             {"local_world_size", o.local_world_size},
             {"requested_rank", o.requested_machine_rank.value_or(-1)}}  // -1: any
            .dump());
  return slot;
}

// The master, parked on the store until the last slot is registered; woken every progress
// interval to say who is missing. On timeout the reason is published, so the others fail now.
Expected<void> awaitAllMachines(store::Store& s, const RendezvousOptions& o,
                                Clock::time_point deadline) {
  const std::string p = prefix(o);
  const std::string lastSlot = p + "agent/" + std::to_string(o.num_machines - 1);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() > 0) {
      try {
        s.wait({lastSlot}, std::min(left, o.progress_interval));
      } catch (const TimeoutError&) {
      }
    }
    int count = static_cast<int>(s.add(p + "arrivals", 0));
    if (count > o.num_machines) {
      return makeError(std::to_string(count) + " machines joined a rendezvous for " +
                       std::to_string(o.num_machines) +
                       " (is another job using the same --main_process_port?)");
    }
    if (count == o.num_machines) return {};
    std::string status = std::to_string(count) + "/" + std::to_string(o.num_machines) +
                         " machines joined" +
                         missingText(registrations(s, o, count), o.num_machines);
    if (Clock::now() >= deadline) {
      std::string message = "rendezvous at " + o.store_address + " timed out after " +
                            secondsText(o.timeout) + ": " + status;
      s.set(p + "assignment", json{{"error", message}}.dump());
      return makeError(message);
    }
    if (o.progress) o.progress(status);
  }
}

// The master assigns every machine its rank and offset and publishes them with one write (or
// publishes why it cannot).
Expected<void> publishAssignment(store::Store& s, const RendezvousOptions& o) {
  auto assigned = assign(registrations(s, o, o.num_machines), o.num_machines);
  if (!assigned) {
    s.set(prefix(o) + "assignment", json{{"error", assigned.error()}}.dump());
    return std::move(assigned).takeError();
  }
  json published = json::array();
  for (const auto& m : assigned->machines) {
    published.push_back({{"host", m.host},
                         {"address", m.address},
                         {"local_world_size", m.local_world_size},
                         {"machine_rank", m.machine_rank},
                         {"rank_offset", m.rank_offset}});
  }
  s.set(prefix(o) + "assignment",
        json{{"machines", published}, {"slots", assigned->slot_rank}}.dump());
  return {};
}

// Every agent: waits for the master's assignment and reads its own place in it.
Expected<RendezvousResult> readAssignment(store::Store& s, const RendezvousOptions& o, int slot,
                                          bool master, Clock::time_point deadline) {
  const std::string p = prefix(o);
  // A little longer than the master, so a master that gives up can still say why.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()) +
              (master ? std::chrono::milliseconds(0) : std::chrono::milliseconds(2000));
  std::string text;
  try {
    text = s.get(p + "assignment", std::max(left, std::chrono::milliseconds(1)));
  } catch (const TimeoutError&) {
    return makeError("rendezvous at " + o.store_address + " timed out after " +
                     secondsText(o.timeout) +
                     ": the master agent (machine_rank 0) did not publish the machine ranks; " +
                     std::to_string(s.add(p + "arrivals", 0)) + "/" +
                     std::to_string(o.num_machines) + " machines joined");
  }
  json assignment = json::parse(text);
  if (assignment.contains("error"))
    return makeError("rendezvous failed: " + assignment["error"].get<std::string>());
  RendezvousResult result;
  for (const auto& m : assignment.at("machines")) {
    result.machines.push_back(MachineInfo{m.at("host").get<std::string>(), m.value("address", ""),
                                          m.at("local_world_size").get<int>(),
                                          m.at("machine_rank").get<int>(),
                                          m.at("rank_offset").get<int>()});
    result.world_size += m.at("local_world_size").get<int>();
  }
  result.machine_rank = assignment.at("slots").at(static_cast<size_t>(slot)).get<int>();
  result.rank_offset = result.machines.at(static_cast<size_t>(result.machine_rank)).rank_offset;
  return result;
}

}  // namespace

Expected<RendezvousResult> rendezvous(store::Store& s, const RendezvousOptions& o) {
  const auto deadline = Clock::now() + o.timeout;
  const bool master = o.requested_machine_rank == 0;
  try {
    const int slot = registerAgent(s, o);
    if (master) {
      if (auto ok = awaitAllMachines(s, o, deadline); !ok) return std::move(ok).takeError();
      if (auto ok = publishAssignment(s, o); !ok) return std::move(ok).takeError();
    }
    return readAssignment(s, o, slot, master, deadline);
  } catch (const Error& e) {
    return makeError(std::string("rendezvous through the store at ") + o.store_address +
                     " failed: " + e.what());
  } catch (const json::exception& e) {
    return makeError(std::string("rendezvous through the store at ") + o.store_address +
                     " failed: malformed record: " + e.what());
  }
}

std::string failureKey(const RendezvousOptions& o) { return prefix(o) + "failure"; }
std::string statusKeyPrefix(const RendezvousOptions& o) { return prefix(o) + "status/"; }

std::optional<JobFailure> publishFailure(store::Store& s, const RendezvousOptions& o,
                                         const JobFailure& mine) {
  try {
    const std::string stored = s.compareSet(failureKey(o), "", failureToJson(mine).dump());
    JobFailure first = failureFromJson(json::parse(stored));
    if (first.machine_rank == mine.machine_rank) return std::nullopt;
    return first;
  } catch (const Error&) {
    return std::nullopt;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::optional<JobFailure> readFailure(store::Store& s, const RendezvousOptions& o,
                                      int machineRank) {
  JobFailure first = failureFromJson(json::parse(s.get(failureKey(o), std::chrono::seconds(30))));
  if (first.machine_rank == machineRank) return std::nullopt;
  return first;
}

int exitBarrier(store::Store& s, const RendezvousOptions& o, bool master,
                std::chrono::milliseconds afterFailure, const std::function<bool()>& othersGone) {
  const std::string key = prefix(o) + "finished";
  try {
    int done = static_cast<int>(s.add(key, 1));
    if (!master) return done;
    std::optional<Clock::time_point> failureDeadline;
    while (done < o.num_machines) {
      if (!failureDeadline && s.check({failureKey(o)}))
        failureDeadline = Clock::now() + afterFailure;
      if (failureDeadline ? Clock::now() >= *failureDeadline : othersGone && othersGone()) {
        return static_cast<int>(s.add(key, 0));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done = static_cast<int>(s.add(key, 0));
    }
    return done;
  } catch (const Error&) {
    return -1;
  }
}

}  // namespace accel::launcher
