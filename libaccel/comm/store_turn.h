#pragma once
// Communicators made one after another on one store (a second Accelerator, a benchmark of one
// backend after another) each meet their own peers: the store a communicator's rendezvous uses
// is the job's store under "<kind>/<N>/", N counting the communicators of that kind this rank
// made on it — the same on every rank, which make them in the same order (as every collective).
// Without it the second one read the first one's keys: a shared-memory segment gone by then, a
// Gloo address nobody listens on.

#include <string>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace accel::comm {

// Blocks for one store round trip; throws what the store throws.
inline c10::intrusive_ptr<c10d::Store> storeForThisTurn(c10::intrusive_ptr<c10d::Store> store,
                                                        const std::string& kind, int rank) {
  const int64_t made = store->add(kind + "/made/" + std::to_string(rank), 1);
  return c10::make_intrusive<c10d::PrefixStore>(kind + "/" + std::to_string(made),
                                                std::move(store));
}

}  // namespace accel::comm
