#pragma once
// GradientSync: data-parallel gradient averaging that overlaps backward. Parameters are packed,
// in reverse registration order (roughly the order backward produces their gradients), into
// buckets of at most `bucket_cap_bytes`. By default (DDP's gradient_as_bucket_view) each
// parameter's .grad is a view of its bucket from construction on: autograd accumulates into the
// bucket itself, and a hook after each parameter's accumulation counts it; a .grad found
// replaced (reset to none, or assigned) is copied in and made the view again. Switched off, a
// hook before accumulation copies each gradient into its bucket instead, and .grad becomes the
// view only once synced. Once a bucket is full its all-reduce starts while backward goes on.
// Buckets start in index order on every rank (DDP's rule): a full bucket waits until every
// earlier bucket has started, since collectives are matched by the order they start in. A
// rank whose use of parameters differs (find_unused_parameters) thus never pairs its bucket
// with another bucket of a peer. finish() starts what is left, in order, waits for the buckets
// and writes the averaged gradients into .grad.
//
// Not thread-safe: one backward at a time, and finish() on the thread that ran it.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace torch::autograd {
struct Node;
}

#include "accel/communicator.h"

namespace accel::sync {

struct GradientSyncOptions {
  size_t bucket_cap_bytes = 25u << 20;
  bool find_unused_parameters = false;  // else a parameter without a gradient is an error
  // DDP's bf16_compress_hook: float32/float64 buckets travel as bfloat16 (half the bytes of
  // fp32) and come back into the full-precision bucket; the average is taken there. How the sum
  // is accumulated is the communicator's: shared memory in fp32, rounded once; Gloo in bf16.
  bool bf16_compression = false;
  // DDP's gradient_as_bucket_view: .grad is a view of the bucket from the start, so backward
  // writes where the all-reduce reads (no gradient tensors beside the buckets at the end of
  // backward: one gradient copy less then; on the CPU a zeroing and an add instead of one copy).
  // Off: each gradient is copied into the bucket as it comes.
  bool gradient_as_bucket_view = true;
};

class GradientSync {
 public:
  // `names` label `params` in errors. Installs a gradient hook on each parameter that needs a
  // gradient; the destructor removes them (the parameters may outlive this object).
  GradientSync(Communicator& comm, std::vector<at::Tensor> params, std::vector<std::string> names,
               GradientSyncOptions options);
  ~GradientSync();

  // Whether the next backward all-reduces (off during gradient accumulation).
  void setEnabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  // After loss.backward() on a synced step: starts what is left, waits for every bucket and
  // replaces each .grad by the average over ranks, a view of its bucket (no copy; valid until
  // the next synced backward, which first gives a .grad still held there its own storage). Blocks
  // until every rank called it (bounded by the communicator's timeout). Throws accel::Error naming
  // the parameters that got no gradient (unless find_unused_parameters, which treats them as zero),
  // or when a collective fails.
  void finish();

  size_t numBuckets() const { return buckets_.size(); }

  // After the optimizer stepped: with gradients as bucket views, zeroes the buckets (one pass
  // each) and makes every .grad its zeroed view again, ready for autograd to accumulate into;
  // otherwise nothing (the caller resets .grad).
  void zeroGradients();
  // Before a backward, with gradients as bucket views: a parameter whose gradient accumulator
  // autograd has replaced since (loading a checkpoint into the model does) gets the hook on its
  // new one. A few microseconds per parameter.
  void rehook();
  bool gradientsAreBucketViews() const { return options_.gradient_as_bucket_view; }

  // The time spent in the communicator since the last call: starting the buckets' all-reduces
  // (which, on a communicator without a thread of its own, run on the caller's thread during
  // backward) and waiting for them in finish(). What a rank waits for the others in, taken out of
  // its own work per step (Accelerator's heartbeat).
  std::chrono::steady_clock::duration takeCommTime();

 private:
  struct Bucket;
  void onGradient(size_t param, const at::Tensor& grad);
  void onAccumulated(size_t param);
  void installViews();
  at::Tensor viewOf(size_t param) const;  // shaped like the parameter
  void contributeUnused(Bucket& bucket, size_t slot);
  void adoptIntoView(size_t param);
  void launchReady();
  [[noreturn]] void failMissing(const std::vector<std::string>& missing);
  void writeBack();
  void startOver();
  void launch(Bucket& bucket);

  Communicator& comm_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  GradientSyncOptions options_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // param → (bucket, slot)
  std::vector<bool> ready_;
  std::vector<std::pair<size_t, unsigned>> hooks_;  // (param, hook handle): copying
  // With gradients as bucket views: each parameter's gradient accumulator (kept alive, so that
  // autograd keeps the one holding the hook) and its post hook's key.
  struct PostHook {
    size_t param;
    std::shared_ptr<torch::autograd::Node> accumulator;
    uintptr_t key;
  };
  PostHook hook(size_t param);
  std::vector<PostHook> post_hooks_;
  size_t next_launch_ = 0;  // the first bucket whose all-reduce has not started
  bool enabled_ = true;
  bool pending_ = false;  // a synced backward ran and finish() has not yet
  std::chrono::steady_clock::duration comm_time_{};
};

}  // namespace accel::sync
