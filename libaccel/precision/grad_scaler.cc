#include "accel/grad_scaler.h"

namespace accel {

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  return options_.enabled ? loss * scale_ : loss;
}

bool GradScaler::unscale(const std::vector<at::Tensor>& grads, Communicator& comm) {
  if (!options_.enabled) return false;
  const double inverse = 1.0 / scale_;
  bool found = false;
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    g.mul_(inverse);
    if (!found && !at::isfinite(g).all().item<bool>()) found = true;
  }
  at::Tensor flag = at::full({1}, found ? 1.0f : 0.0f);
  comm.allreduce(flag, ReduceOp::Max);
  return flag.item<float>() > 0;
}

void GradScaler::update(bool foundInf) {
  if (!options_.enabled) return;
  if (foundInf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

}  // namespace accel
