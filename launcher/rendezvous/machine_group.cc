#include "launcher/rendezvous/machine_group.h"

#include <unistd.h>

#include <mutex>
#include <random>

#include "accel/error.h"
#include "launcher/rendezvous/round/keys.h"
#include "launcher/rendezvous/store_host.h"

namespace accel::launcher {

size_t clearWorkerKeys(StoreHost& store, const Notify& notify) {
  try {
    return store.clearKeysExcept({kAgentKeyPrefix});
  } catch (const Error& e) {
    notify(std::string("could not clear the store between attempts: ") + e.what());
    return 0;
  }
}

std::string agentToken(const std::string& host) {
  static std::mutex mutex;
  static std::minstd_rand random(static_cast<unsigned>(::getpid()) ^
                                 static_cast<unsigned>(std::random_device{}()));
  std::lock_guard lock(mutex);
  return host + "-" + std::to_string(::getpid()) + "-" + std::to_string(random());
}

std::string placedText(const Placement& p, int localWorldSize) {
  const int first = p.rank_offset, last = first + localWorldSize - 1;
  return "machine " + std::to_string(p.machine_rank) + " of " + std::to_string(p.num_machines) +
         ": " +
         (first == last ? "rank " + std::to_string(first)
                        : "ranks " + std::to_string(first) + "\u2013" + std::to_string(last)) +
         " of " + std::to_string(p.world_size);
}

GroupSettings groupSettingsOf(const LaunchPlan& plan) {
  GroupSettings s;
  s.run_id = plan.rendezvous_id;
  s.num_machines = plan.num_machines;
  s.min_machines = plan.min_machines;
  s.max_restarts = plan.max_restarts;
  s.retry_identical_failures = plan.retry_identical_failures;
  s.local_world_size = plan.local_world_size;
  s.host = thisHostName();
  s.timeouts = plan.round_timeouts;
  return s;
}

std::string spareNotice(int round, int roundSize, int maxMachines) {
  const std::string r = "round " + std::to_string(round);
  if (roundSize >= maxMachines) {
    return r + " is full (" + std::to_string(roundSize) +
           " machines, the most the job takes): this machine waits as a spare for a later round";
  }
  return r + " closed with " + std::to_string(roundSize) + " of at most " +
         std::to_string(maxMachines) +
         " machines just before this machine joined it: it joins the next round, which the "
         "group forms to take it";
}

std::string thisHostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace accel::launcher
