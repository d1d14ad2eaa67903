#pragma once
// The CPU communicator of a job on several machines: the ranks of each machine form a
// shared-memory group (shm_communicator.h) and local rank 0 of every machine joins a Gloo group
// of those leaders. All-reduce: shared memory inside the machine, Gloo between the leaders,
// shared-memory broadcast from the leader; so each machine sends the bytes of one rank over the
// network instead of LOCAL_WORLD_SIZE ranks'. Broadcast (from any rank), all-gather (rank
// order) and barrier compose the same way. Operations run in order on a thread of the
// communicator's (op_queue.h): allreduceAsync returns at once. Not thread-safe, like every
// Communicator; each call blocks at most the options' timeouts per stage.

#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "accel/communicator.h"
#include "libaccel/comm/gloo_communicator.h"
#include "libaccel/comm/shm_communicator.h"

namespace accel::comm {

struct HierarchicalLayout {
  int rank = 0;        // global
  int size = 1;        // global
  int local_rank = 0;  // within the machine
  int local_size = 1;  // ranks per machine, the same on every machine
};

// Forms both groups through `store` (under the prefixes "node<machine>/" and "leaders/").
// Ranks of a machine must be contiguous: rank = machine × local_size + local_rank (as `accel
// launch` and torchrun number them). Throws accel::Error naming the values when the layout is
// not that; what makeShmCommunicator and makeGlooCommunicator throw otherwise.
std::unique_ptr<Communicator> makeHierarchicalCommunicator(c10::intrusive_ptr<c10d::Store> store,
                                                           const HierarchicalLayout& layout,
                                                           const ShmOptions& shm,
                                                           const GlooOptions& gloo);

}  // namespace accel::comm
