#include "launcher/rendezvous/c10d/rendezvous.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"
#include "launcher/rendezvous/round/stored_number.h"

namespace accel::launcher {
namespace {

using nlohmann::json;

std::string list(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

// Reads the registrations of slots [0, count) into `known`, those not read before only: a
// registration never changes, so the master reads each once per round, however often it looks.
const std::vector<json>& registrations(store::Store& s, const GroupSettings& o, const RoundStart& r,
                                       int count, std::vector<json>& known) {
  for (int slot = static_cast<int>(known.size()); slot < count; ++slot) {
    known.push_back(json::parse(s.get(roundKeys(o, r.round).agent(slot), o.timeouts.record)));
  }
  return known;
}

// Whether registration `j`'s agent is still there (its presence key waited on): the master's
// view; without one, every registration counts.
bool isPresent(const json& j, const GroupSettings& o) {
  return !o.present || o.present(j.value("token", ""));
}

// How many of the round's `count` registrations are of agents still there: one that registered
// and died is not waited for, and never becomes a member.
int presentCount(store::Store& s, const GroupSettings& o, const RoundStart& r, int count,
                 std::vector<json>& known) {
  if (!o.present) return count;
  const std::vector<json>& joined = registrations(s, o, r, count, known);
  return static_cast<int>(
      std::count_if(joined.begin(), joined.end(), [&o](const json& j) { return isPresent(j, o); }));
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
  // A few by name, then how many more: a round of thousands must not print them all every
  // progress interval.
  constexpr size_t kNamed = 8;
  const size_t more = missing.size() > kNamed ? missing.size() - kNamed : 0;
  missing.resize(missing.size() - more);
  return "; waiting for machine_rank " + list(missing) +
         (more ? " and " + std::to_string(more) + " more" : std::string());
}

struct Assignment {
  std::vector<MachineInfo> machines;  // by machine rank
  std::vector<int> slot_rank;         // registration slot → machine rank
};

// The master's single pass: honour requested ranks, give the rest out in the order of `joined`.
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
    m.presence = joined[slot].value("token", "");
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
int registerAgent(store::Store& s, const GroupSettings& o, const RoundStart& r) {
  const int slot = static_cast<int>(s.add(roundKeys(o, r.round).arrivals(), 1)) - 1;
  s.set(roundKeys(o, r.round).agent(slot),
        json{{"host", o.host},
             {"address", o.address},
             {"local_world_size", o.local_world_size},
             {"token", o.presence},
             {"requested_rank", o.requested_machine_rank.value_or(-1)}}  // -1: any
            .dump());
  return slot;
}

// The master, parked on the store until the round can close (RoundClosing); every progress
// interval (not at each wake-up: an arrival, the last call's end) it says who is missing. It
// looks before it first waits, so a master that is MIN by itself starts the last call as it
// registers. On timeout the reason is published, so the
// others fail now. Returns how many machines the round has.
Expected<int> awaitMachines(store::Store& s, const GroupSettings& o, const RoundStart& r,
                            Clock::time_point deadline, std::vector<json>& known) {
  const RoundKeys keys = roundKeys(o, r.round);
  const bool elastic = o.elastic();
  // The count at which the round may first close (the survivors of a re-forming group, else
  // MIN); past it, MAX.
  const int firstClose =
      r.expect_machines > 0 ? std::max(o.leastMachines(), r.expect_machines) : o.leastMachines();
  RoundClosing closing = roundClosing(o, r);
  Clock::time_point nextProgress = o.clock->now() + o.timeouts.progress;
  for (;;) {
    const int count = static_cast<int>(s.add(keys.arrivals(), 0));
    const int here = presentCount(s, o, r, count, known);
    if (here > o.num_machines && !elastic) {  // said to the others too: they fail at once
      const std::string message = std::to_string(here) + " machines joined a rendezvous for " +
                                  std::to_string(o.num_machines) + " at " + o.store_address +
                                  " (is another job using the same port?)";
      s.set(keys.assignment(), json{{"error", message}}.dump());
      return makeError(message);
    }
    if (closing.ready(here, o.clock->now())) return std::min(here, o.num_machines);
    std::string status =
        std::to_string(here) + "/" + std::to_string(o.num_machines) + " machines joined" +
        (here < count ? " (" + std::to_string(count - here) + " left again)" : std::string()) +
        (elastic ? " (" + std::to_string(o.leastMachines()) + " needed)"
                 : missingText(registrations(s, o, r, count, known), o.num_machines));
    // Once MIN joined, the round closes at the last call, whatever the rendezvous timeout.
    if (o.clock->now() >= deadline && !closing.lastCallEnd()) {
      std::string message = "rendezvous at " + o.store_address + " timed out after " +
                            secondsText(o.timeouts.join) + ": " + status;
      s.set(keys.assignment(), json{{"error", message}}.dump());
      return makeError(message);
    }
    if (o.progress && o.clock->now() >= nextProgress) {
      nextProgress = o.clock->now() + o.timeouts.progress;
      // While the last call runs (MIN joined), when the round closes; before, who is missing.
      if (auto end = closing.lastCallEnd()) {
        o.progress(formingText(
            here, closing.least(), closing.most(),
            std::chrono::duration_cast<std::chrono::milliseconds>(*end - o.clock->now()),
            std::chrono::milliseconds(0)));
      } else {
        o.progress(status);
      }
    }
    // The next arrival that matters: the one that reaches the first close, then MAX.
    const std::string lastSlot = keys.agent((count < firstClose ? firstClose : o.num_machines) - 1);
    // Rounded up: a wait that ends a fraction of a millisecond early looks again for nothing.
    const auto wakeAt = std::min(closing.lastCallEnd().value_or(deadline), nextProgress);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(wakeAt - o.clock->now());
    try {
      s.wait({lastSlot}, std::clamp(left, std::chrono::milliseconds(1), o.timeouts.progress));
    } catch (const TimeoutError&) {
    }
  }
}

// The machine ranks of the round before's members, by presence token (none in round 0, or when
// that round never formed): they keep their order in this one.
std::map<std::string, int> previousRanks(store::Store& s, const GroupSettings& o,
                                         const RoundStart& r) {
  if (r.round == 0) return {};
  const std::string before = roundKeys(o, r.round - 1).members();
  if (!s.check({before})) return {};
  return ranksByToken(json::parse(s.get(before, o.timeouts.request), nullptr, false));
}

// The round's members among the registrations of agents still there, `machines` at most, ranked
// as rankMembers says (round/closing.h); returns their slots. The rest are spares (or gone).
std::vector<int> members(const std::vector<json>& joined, int machines, const GroupSettings& o,
                         const std::map<std::string, int>& before) {
  std::vector<Registrant> present;
  std::vector<int> slots;
  for (size_t slot = 0; slot < joined.size(); ++slot) {
    if (!isPresent(joined[slot], o)) continue;
    present.push_back({joined[slot].value("token", ""), static_cast<int64_t>(slot),
                       joined[slot].at("requested_rank").get<int>() >= 0});
    slots.push_back(static_cast<int>(slot));
  }
  std::vector<int> chosen;
  for (size_t i : rankMembers(present, before, machines)) chosen.push_back(slots[i]);
  return chosen;
}

json machineJson(const MachineInfo& m) {
  return {{"host", m.host},
          {"address", m.address},
          {"token", m.presence},
          {"local_world_size", m.local_world_size},
          {"machine_rank", m.machine_rank},
          {"rank_offset", m.rank_offset}};
}

MachineInfo machineOf(const json& m) {
  return MachineInfo{m.at("host").get<std::string>(), m.value("token", ""),
                     m.value("address", ""),          m.at("local_world_size").get<int>(),
                     m.at("machine_rank").get<int>(), m.at("rank_offset").get<int>()};
}

// The round's summary: what every agent reads (its size, the restart count, machine 0), the
// same size whatever the round's.
json summaryOf(const std::vector<MachineInfo>& machines, int slots, const GroupSettings& o,
               const RoundStart& r) {
  int world = 0;
  for (const auto& m : machines) world += m.local_world_size;
  return {{"size", machines.size()},
          {"slots", slots},  // registrations placed: a later one is a spare
          {"world_size", world},
          {"machine0", machineJson(machines.front())},
          {"max_restarts", o.max_restarts},
          {"restart_count", r.restart_count}};
}

// Registration slots [first, first + kPlacesPerChunk)'s places: [machine rank, rank offset]
// each, [-1, 0] for a spare.
std::vector<json> placeChunks(const std::vector<int>& slotRank,
                              const std::vector<MachineInfo>& machines) {
  std::vector<json> chunks;
  for (size_t slot = 0; slot < slotRank.size(); ++slot) {
    if (slot % RoundKeys::kPlacesPerChunk == 0) chunks.push_back(json::array());
    const int rank = slotRank[slot];
    chunks.back().push_back(
        json::array({rank, rank < 0 ? 0 : machines[static_cast<size_t>(rank)].rank_offset}));
  }
  return chunks;
}

// The master assigns every member its rank and offset (or publishes why it cannot): the whole
// list for itself and the next round's ranking, the slots' places in chunks, then the summary
// every agent waits for. Slots that are not members get rank -1: spares. Returns the members.
Expected<std::vector<MachineInfo>> publishAssignment(store::Store& s, const GroupSettings& o,
                                                     const RoundStart& r, int machines, int count,
                                                     std::vector<json>& known) {
  const RoundKeys keys = roundKeys(o, r.round);
  const std::vector<json>& joined = registrations(s, o, r, count, known);
  const std::vector<int> chosen = members(joined, machines, o, previousRanks(s, o, r));
  std::vector<json> memberRecords;
  for (int slot : chosen) memberRecords.push_back(joined[static_cast<size_t>(slot)]);
  auto assigned = assign(memberRecords, machines);
  if (!assigned) {
    s.set(keys.assignment(), json{{"error", assigned.error()}}.dump());
    return std::move(assigned).takeError();
  }
  std::vector<int> slotRank(static_cast<size_t>(count), -1);
  for (size_t i = 0; i < chosen.size(); ++i)
    slotRank[static_cast<size_t>(chosen[i])] = assigned->slot_rank[i];
  json all = json::array();
  for (const auto& m : assigned->machines) all.push_back(machineJson(m));
  s.set(keys.members(), all.dump());
  const std::vector<json> chunks = placeChunks(slotRank, assigned->machines);
  for (size_t c = 0; c < chunks.size(); ++c)
    s.set(keys.places(static_cast<int>(c)), chunks[c].dump());
  s.set(keys.assignment(), summaryOf(assigned->machines, count, o, r).dump());
  return std::move(assigned->machines);
}

// Every agent but the master: waits for the master's summary and reads its own place (one chunk
// of the places: what it reads does not grow with the round).
Expected<RendezvousResult> readAssignment(store::Store& s, const GroupSettings& o,
                                          const RoundStart& r, int slot,
                                          Clock::time_point deadline) {
  const RoundKeys keys = roundKeys(o, r.round);
  // A little longer than the master, so a master that gives up can still say why; and a last
  // call that began just before the timeout still closes the round.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - o.clock->now()) +
              o.timeouts.last_call + o.timeouts.answer_margin;
  std::string text;
  try {
    text = s.get(keys.assignment(), std::max(left, std::chrono::milliseconds(1)));
  } catch (const TimeoutError&) {
    return makeError("rendezvous at " + o.store_address + " timed out after " +
                     secondsText(o.timeouts.join) +
                     ": the master agent (machine_rank 0) did not publish the machine ranks; " +
                     std::to_string(s.add(keys.arrivals(), 0)) + "/" +
                     std::to_string(o.num_machines) + " machines joined");
  }
  json summary = json::parse(text);
  if (summary.contains("error"))
    return makeError("rendezvous failed: " + summary["error"].get<std::string>());
  RendezvousResult result;
  result.restart_count = summary.value("restart_count", 0);  // a spare's next try's too
  if (summary.contains("closed")) {  // the job ended before this round formed
    result.closed = summary["closed"].get<std::string>();
    return result;
  }
  result.size = summary.at("size").get<int>();
  if (slot >= summary.at("slots").get<int>()) {  // registered after the master placed the round
    result.spare = true;
    result.round_size = result.size;
    return result;
  }
  // Written before the summary, so it is there: bounded as the summary's wait was (a store that
  // answers slowly under a thousand agents at once is no reason to fail the round).
  const json chunk = json::parse(s.get(keys.places(slot / RoundKeys::kPlacesPerChunk),
                                       std::max(left, std::chrono::milliseconds(1))));
  const json& place = chunk.at(static_cast<size_t>(slot % RoundKeys::kPlacesPerChunk));
  result.machine_rank = place.at(0).get<int>();
  if (result.machine_rank < 0) {
    result.spare = true;  // the group was full, or closed just before this agent registered
    result.round_size = result.size;
    return result;
  }
  result.rank_offset = place.at(1).get<int>();
  result.world_size = summary.at("world_size").get<int>();
  result.max_restarts = summary.value("max_restarts", 0);
  result.machines.push_back(machineOf(summary.at("machine0")));
  return result;
}

// The master's own result: it made the round.
RendezvousResult masterResult(std::vector<MachineInfo> machines, const GroupSettings& o,
                              const RoundStart& r) {
  RendezvousResult result;
  result.restart_count = r.restart_count;
  result.max_restarts = o.max_restarts;
  result.size = static_cast<int>(machines.size());
  for (const auto& m : machines) result.world_size += m.local_world_size;
  result.machines = std::move(machines);
  return result;  // machine 0, rank offset 0
}

}  // namespace

int presentRegistrations(store::Store& s, const GroupSettings& o, int round) {
  const int count = static_cast<int>(s.add(roundKeys(o, round).arrivals(), 0));
  std::vector<json> known;
  return presentCount(s, o, RoundStart{round, 0, 0}, count, known);
}

bool registrationPresent(store::Store& s, const GroupSettings& o, int round, int slot) {
  if (!o.present) return true;
  const std::string key = roundKeys(o, round).agent(slot);
  const json j = json::parse(s.get(key, o.timeouts.record), nullptr, false);
  if (!j.is_object()) throw Error("the key '" + key + "' holds no agent's registration");
  return isPresent(j, o);
}

RoundClosing roundClosing(const GroupSettings& o, const RoundStart& r) {
  return RoundClosing(o.leastMachines(), o.num_machines, r.expect_machines, o.timeouts.last_call);
}

Expected<RendezvousResult> rendezvous(store::Store& s, const GroupSettings& o,
                                      const RoundStart& r) {
  const auto deadline = o.clock->now() + o.timeouts.join;
  const bool master = o.requested_machine_rank == 0;
  try {
    if (master) s.set(jobKeys(o).openRound(), std::to_string(r.round));
    const int slot = registerAgent(s, o, r);
    if (!master) return readAssignment(s, o, r, slot, deadline);
    std::vector<json> known;  // the round's registrations, each read once
    auto machines = awaitMachines(s, o, r, deadline, known);
    if (!machines) return std::move(machines).takeError();
    const int count = static_cast<int>(s.add(roundKeys(o, r.round).arrivals(), 0));
    auto members = publishAssignment(s, o, r, *machines, count, known);
    if (!members) return std::move(members).takeError();
    return masterResult(std::move(*members), o, r);
  } catch (const Error& e) {
    return makeError(std::string("rendezvous through the store at ") + o.store_address +
                     " failed: " + e.what());
  } catch (const json::exception& e) {
    return makeError(std::string("rendezvous through the store at ") + o.store_address +
                     " failed: malformed record: " + e.what());
  }
}

int openRound(store::Store& s, const GroupSettings& o, std::chrono::milliseconds timeout) {
  const std::string key = jobKeys(o).openRound();
  return storedInt(key, s.get(key, timeout));
}

void closeRound(store::Store& s, const GroupSettings& o, int round, const std::string& why) {
  s.compareSet(roundKeys(o, round).assignment(), "", json{{"closed", why}}.dump());
}

}  // namespace accel::launcher
