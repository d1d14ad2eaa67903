#include "accel/grad_scaler.h"

#include <algorithm>
#include <map>

#include <torch/version.h>

namespace accel {
namespace {

// Whether LibTorch has the fused unscale-and-check kernel (torch's GradScaler uses it) on
// `device`: on CUDA always, on the CPU from torch 2.3.
bool hasFusedUnscale(const at::Device& device) {
  if (device.is_cuda()) return true;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  return device.is_cpu();
#else
  return false;
#endif
}

// Unscales `grads` (all on `flag`'s device) in place and raises `flag` to 1 when any value is inf
// or NaN: one fused kernel per dtype where LibTorch has it (instead of ~7 per gradient), else a
// pass per gradient.
void unscaleInto(const std::vector<at::Tensor>& grads, double inverse, at::Tensor& flag) {
  const bool sameDevice = std::all_of(grads.begin(), grads.end(), [&](const at::Tensor& g) {
    return !g.defined() || g.device() == flag.device();
  });
  if (sameDevice && hasFusedUnscale(flag.device())) {
    std::map<at::ScalarType, std::vector<at::Tensor>> byType;
    for (const auto& g : grads)
      if (g.defined()) byType[g.scalar_type()].push_back(g);
    const at::Tensor inv = at::full({1}, inverse, flag.options());
    for (auto& [type, group] : byType)
      at::_amp_foreach_non_finite_check_and_unscale_(group, flag, inv);
    return;
  }
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    g.mul_(inverse);
    flag.copy_(at::maximum(flag, at::logical_not(at::isfinite(g)).any().to(at::kFloat)));
  }
}

}  // namespace

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
  unscaleInto(grads, inverse, flag);
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
