#pragma once
// The shared-memory communicator: the collectives of ranks that all run on one machine, through
// one POSIX shared-memory segment per job (shm_group.h) instead of loopback TCP. Where the
// machine has a CPU to spare, operations run in the order they were started on one thread of the
// communicator's, so allreduceAsync returns at once and gradient buckets overlap backward; the
// blocking calls queue behind what is in flight, or run on the caller's thread when nothing is.
// With one CPU per rank or fewer, allreduceAsync runs the all-reduce at once on the caller's
// thread (ShmOptions::async) and its Work holds the outcome. Tensors must be contiguous CPU
// tensors; all-reduce takes float32/64, bfloat16, float16 and 8- to 64-bit integers (bf16 and fp16
// accumulated in fp32). Results are the same on every run. Not thread-safe (one caller thread),
// like every Communicator.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "accel/communicator.h"
#include "libaccel/comm/shm_group.h"

namespace accel::comm {

struct ShmOptions {
  // Bound on forming the group and on each collective (overrides group.timeout).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Names the segment, for a human reading /dev/shm (the run id).
  std::string tag;
  shm::GroupOptions group;
  // Whether allreduceAsync runs on the communicator's thread, overlapping the caller, or on the
  // caller's before it returns. Unset: on the thread only when the CPUs this process may run on
  // outnumber the ranks. With one CPU per rank or fewer that thread cannot overlap anything: it
  // takes its time from some rank's compute, and adds a hand-off and a wake-up per operation.
  std::optional<bool> async;
};

// Forms the group of `size` ranks through `store`: rank 0 sweeps stale segments of dead jobs,
// creates the segment and publishes its name and nonce under the key "shm/segment"; the others
// read it (waiting at most the store's timeout) and map it. Blocks until every rank attached, then
// the segment's name is removed (the mappings live on). Throws accel::Error when the segment
// cannot be created or opened (no room in /dev/shm; a rank on another machine), naming it.
std::unique_ptr<Communicator> makeShmCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                  int size, const ShmOptions& options);

}  // namespace accel::comm
