#pragma once
// The CUDA communicator: libnccl called directly (Debian's LibTorch has no CUDA and no
// ProcessGroupNCCL). Tensors given to it live on the host, as they do with this LibTorch; each
// collective stages them through device buffers on the communicator's own stream:
// copy in, NCCL collective, copy out, all asynchronous until Work::wait().
// Built only when CUDA and NCCL were found (ACCEL_HAVE_NCCL).

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "accel/communicator.h"

namespace accel::comm {

// Whether a CUDA device can be used, and why not ("" when it can).
std::string cudaUnavailableReason();

// Joins the NCCL clique of `size` ranks on device `device`; rank 0's unique id travels through
// `store`. Blocks until every rank joined. Throws accel::Error naming the CUDA/NCCL failure.
std::unique_ptr<Communicator> makeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                                   int device, std::chrono::milliseconds timeout);

}  // namespace accel::comm
