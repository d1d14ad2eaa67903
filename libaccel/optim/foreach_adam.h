#pragma once
// LibTorch's Adam and AdamW step one parameter at a time: eight small kernels each, so a model
// of N tensors launches 8N per step, and on a GPU a small model's step waits on the launches.
// foreachAdamStep takes the same step with torch's multi-tensor (_foreach_) operations — the
// eight operations once over all of a group's tensors, what Python's torch.optim.Adam does by
// default on CUDA (foreach=True) — on the optimizer's own state, so its checkpoints do not
// change. The arithmetic is LibTorch's, operation for operation.

#include <type_traits>
#include <utility>

#include <torch/optim/optimizer.h>

namespace accel::optim {

// Steps `optimizer` when it is a torch::optim::Adam or AdamW whose parameter groups it can take
// (dense gradients, no amsgrad, within a group every parameter at the same step count), and
// returns true; else returns false having changed nothing (the caller calls optimizer.step()).
// Throws what the _foreach_ operations throw.
bool foreachAdamStep(torch::optim::Optimizer& optimizer);

// The key of `param`'s entry in optimizer.state(): its TensorImpl's address, printed (LibTorch
// 1.x) or as is (2.x).
using OptimizerStateKey =
    std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
OptimizerStateKey optimizerStateKey(const at::Tensor& param);

}  // namespace accel::optim
