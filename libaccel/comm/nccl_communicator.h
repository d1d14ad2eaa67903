#pragma once
// The CUDA communicator: libnccl called directly on CUDA tensors, through CollectiveEngine
// (collective_engine.h), which decides the order of the calls, the events and the watchdog;
// this file holds only the CUDA and NCCL calls (CudaQueue). NCCL runs non-blocking: joining the
// clique and every call are bounded by the timeout, and a stuck collective or a peer's failure
// aborts the communicator (ncclCommAbort) instead of hanging. Built only when CUDA and NCCL were
// found (ACCEL_HAVE_NCCL).

#include <chrono>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "accel/communicator.h"

namespace accel::comm {

// Whether a CUDA device can be used, and why not ("" when it can).
std::string cudaUnavailableReason();

// Joins the NCCL clique of `size` ranks on device `device`; rank 0's unique id travels through
// `store` (other ranks wait for it at most `timeout`), then ncclCommInitRankConfig runs
// non-blocking, polled until every rank joined or `timeout` passed (then aborted). Throws
// accel::Error naming the CUDA/NCCL failure or the timeout, and what the store throws when the
// id does not come.
std::unique_ptr<Communicator> makeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, int device,
                                                   std::chrono::milliseconds timeout);

}  // namespace accel::comm
