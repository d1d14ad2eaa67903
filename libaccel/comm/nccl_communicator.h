#pragma once
// The CUDA communicator: libnccl called directly (Debian's LibTorch has no CUDA and no
// ProcessGroupNCCL). Tensors given to it live on the host, as they do with this LibTorch; each
// collective stages them through a device buffer on the communicator's own stream: copy in,
// NCCL collective, copy out. The copies are from and to pageable host memory, which CUDA
// performs synchronously, so every collective blocks until its result is in the tensor,
// allreduceAsync included: the Work it returns is already complete, and gradient buckets do
// not overlap backward (a truly asynchronous path is issue #14). Not thread-safe.
// Built only when CUDA and NCCL were found (ACCEL_HAVE_NCCL).

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "accel/communicator.h"

namespace accel::comm {

// Whether a CUDA device can be used, and why not ("" when it can).
std::string cudaUnavailableReason();

// Joins the NCCL clique of `size` ranks on device `device`; rank 0's unique id travels through
// `store` (other ranks wait for it at most `timeout`). Then blocks in ncclCommInitRank until
// every rank joined, which has no timeout of its own. Throws accel::Error naming the CUDA/NCCL
// failure, and what the store throws when the id does not come.
std::unique_ptr<Communicator> makeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, int device,
                                                   std::chrono::milliseconds timeout);

}  // namespace accel::comm
