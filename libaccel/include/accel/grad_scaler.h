#pragma once
// GradScaler: dynamic loss scaling for fp16, with torch.cuda.amp.GradScaler's defaults and
// behaviour: scale the loss; before the step, unscale the gradients and skip the step if any
// rank found inf/NaN; back off ×0.5 after an overflow, grow ×2 after `growth_interval` finite
// steps in a row.

#include <vector>

#include <ATen/ATen.h>

#include "accel/communicator.h"

namespace accel {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {})
      : options_(options), scale_(options.init_scale) {}

  // loss × scale (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;

  // Divides every gradient by the scale in place (once per step) and returns whether any rank
  // found an inf or NaN: an all-reduce MAX over `comm`, so a collective (every rank calls it;
  // blocks; throws accel::Error when it fails). Without scaling it returns false at once.
  bool unscale(const std::vector<at::Tensor>& grads, Communicator& comm);

  // After the optimizer step (or its skip): backoff on overflow, growth after the interval.
  void update(bool foundInf);

  double currentScale() const { return scale_; }
  int growthTracker() const { return growth_tracker_; }
  bool enabled() const { return options_.enabled; }

  // For checkpoints.
  void setState(double scale, int growthTracker) {
    scale_ = scale;
    growth_tracker_ = growthTracker;
  }

 private:
  GradScalerOptions options_;
  double scale_;
  int growth_tracker_ = 0;
};

}  // namespace accel
