#include "launcher/rendezvous/machine_group.h"

#include <unistd.h>

#include "accel/error.h"
#include "launcher/rendezvous/group_store.h"
#include "launcher/rendezvous/job_keys.h"

namespace accel::launcher {

void clearWorkerKeys(StoreHost& store, int round, const Notify& notify) {
  try {
    const size_t removed = store.clearKeysExcept({kAgentKeyPrefix});
    notify("attempt " + std::to_string(round) + ": removed " + std::to_string(removed) +
           (removed == 1 ? " value" : " values") +
           " that earlier attempts' workers left in the job's store, so none is read as this "
           "attempt's");
  } catch (const Error& e) {
    notify(std::string("could not clear the store between attempts: ") + e.what());
  }
}

std::string thisHostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace accel::launcher
