#include "accel/grad_scaler.h"

namespace accel {

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  return options_.enabled ? loss * scale_ : loss;
}

bool GradScaler::unscale(const std::vector<at::Tensor>& grads, Communicator& comm) {
  if (!options_.enabled) return false;
  const double inverse = 1.0 / scale_;
  // The flag lives where the gradients do, and is read once: one host wait per step, after the
  // all-reduce, whatever the number of gradients.
  at::Device device = comm.device();
  for (const auto& g : grads) {
    if (g.defined()) {
      device = g.device();
      break;
    }
  }
  at::Tensor flag = at::zeros({1}, at::TensorOptions(at::kFloat).device(device));
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    g.mul_(inverse);
    flag.copy_(at::maximum(flag, at::logical_not(at::isfinite(g)).any().to(at::kFloat)));
  }
  comm.allreduce(flag, ReduceOp::Max);
  comm.synchronize();  // on CUDA: an aborted all-reduce throws here, not a wrong flag below
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
