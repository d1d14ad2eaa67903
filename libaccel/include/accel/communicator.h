#pragma once
// Communicator: the collectives a training process needs, on CPU (Gloo through LibTorch's
// c10d) or, when built with NCCL, on CUDA devices. One per process; not thread-safe. Every
// collective must be called by every rank, in the same order (collectives are matched by the
// order they start in); each one that blocks does so for at most the timeout the communicator
// was made with, then throws accel::Error, as it does when a peer died. On CUDA, "blocking"
// means ordered before the caller's later work on its stream (see Work::wait and
// comm/collective_engine.h); barrier() and synchronize() block the host there too.

#include <memory>
#include <vector>

#include <ATen/ATen.h>

namespace accel {

enum class ReduceOp { Sum, Max, Min };

// How CPU ranks talk: Auto picks shared memory when every rank is on this machine, shared
// memory inside each machine plus Gloo between them when several machines run more than one
// rank each, Gloo otherwise; SharedMemory insists (an error when that layout does not hold or a
// rank cannot map the segment); Gloo is loopback or network TCP through LibTorch's
// ProcessGroupGloo alone.
enum class CpuBackend { Auto, SharedMemory, Gloo };

// An operation in flight.
class Work {
 public:
  virtual ~Work() = default;
  // On the CPU: blocks until the operation finished and its result is in the tensor. On CUDA
  // (the NCCL communicator): orders the caller's current stream after the operation and returns
  // at once, as torch's Work.wait() does — work queued on that stream afterwards sees the result,
  // and the host sees it when it reads the tensor. Throws accel::Error on failure, e.g. a peer
  // that died (on CUDA: once the watchdog aborted the communicator).
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The backend, for logs and tests: "gloo", "shm", "nccl", "single".
  virtual const char* backend() const = 0;
  // Starts an in-place all-reduce of `tensor` (contiguous); the result is in `tensor` once the
  // returned Work's wait() returned, and `tensor` must not be used before. Whether this call
  // returns before the collective completed depends on the implementation: Gloo returns at
  // once; the NCCL communicator too, the all-reduce queued on its own stream.
  virtual std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) = 0;
  // In-place broadcast from `root`. Blocking.
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
  // Every rank's `tensor` (all the same shape), in rank order. Blocking.
  virtual std::vector<at::Tensor> allgather(const at::Tensor& tensor) = 0;
  // Blocks until every rank reached it.
  virtual void barrier() = 0;
  // Where the tensors given to it must live: the CPU, or the CUDA device of an NCCL
  // communicator.
  virtual at::Device device() const { return at::kCPU; }
  // Blocks until every collective started so far completed; throws accel::Error when one
  // failed. A no-op where collectives complete before they return (the CPU communicators).
  virtual void synchronize() {}

  // An in-place average: each rank's `tensor` divided by size() as tensor.mul_(1.0 / size())
  // divides it, then summed as allreduceAsync sums — DDP's division before the all-reduce. By
  // default exactly that; shared memory scales float32 on its way into the segment and into the
  // sum instead of in a pass of its own (the same bits).
  virtual std::unique_ptr<Work> allreduceMeanAsync(at::Tensor& tensor);

  // An in-place sum of a float32 `tensor` whose bytes travel as bfloat16 (DDP's
  // bf16_compress_hook): each rank's part rounded to bf16 and summed as this backend sums bf16
  // (shared memory: in fp32, rounded once; Gloo and NCCL: in bf16), the sum widened back into
  // `tensor` once the returned Work's wait() returned. `mean`: each rank's part divided by size()
  // first, as allreduceMeanAsync divides it (then rounded). `wire`: a bf16 tensor of the same
  // size on the same device, the caller's to reuse, where needsBf16Wire(tensor) says so (the
  // others round into it and all-reduce it); else it may be undefined: shared memory converts
  // float32 on the way in and out, scaling on the way too.
  virtual std::unique_ptr<Work> allreduceBf16WireAsync(at::Tensor& tensor, at::Tensor& wire,
                                                       bool mean);
  // Whether allreduceBf16WireAsync of `tensor` needs its `wire`.
  virtual bool needsBf16Wire(const at::Tensor& tensor) const {
    (void)tensor;
    return true;
  }

  // In-place all-reduce. Blocking. (Virtual so that a communicator can run it on the caller's
  // thread when nothing is in flight.)
  virtual void allreduce(at::Tensor& tensor, ReduceOp op = ReduceOp::Sum) {
    allreduceAsync(tensor, op)->wait();
  }
};

// A world of one: every collective is the identity. No networking.
std::unique_ptr<Communicator> makeSingleProcessCommunicator();

}  // namespace accel
