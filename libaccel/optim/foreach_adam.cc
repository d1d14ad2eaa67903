#include "libaccel/optim/foreach_adam.h"

#include <cmath>
#include <sstream>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

namespace accel::optim {
namespace {

// One group's parameters that have a gradient, with their state (created as LibTorch creates
// it on a parameter's first step).
template <typename State>
struct GroupTensors {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<State*> states;
};

template <typename State>
bool collect(torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamGroup& group,
             GroupTensors<State>& out) {
  auto& state = optimizer.state();
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    if (p.grad().is_sparse()) return false;
    const OptimizerStateKey key = optimizerStateKey(p);
    auto found = state.find(key);
    if (found == state.end()) {
      auto fresh = std::make_unique<State>();
      fresh->step(0);
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      found = state.emplace(key, std::move(fresh)).first;
    }
    auto* s = static_cast<State*>(found->second.get());
    if (!out.states.empty() && s->step() != out.states.front()->step()) return false;
    out.params.push_back(p);
    out.grads.push_back(p.grad());
    out.exp_avgs.push_back(s->exp_avg());
    out.exp_avg_sqs.push_back(s->exp_avg_sq());
    out.states.push_back(s);
  }
  return true;
}

// LibTorch's Adam::step / AdamW::step for one group, operation for operation over all its
// tensors at once. `decoupled`: AdamW's weight decay (the parameters shrink first), else
// Adam's (added to the gradient).
template <typename State>
void stepGroup(GroupTensors<State>& t, double lr, double beta1, double beta2, double eps,
               double weight_decay, bool decoupled) {
  if (t.params.empty()) return;
  for (auto* s : t.states) s->step(s->step() + 1);
  const auto step = static_cast<double>(t.states.front()->step());
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  std::vector<at::Tensor> grads = t.grads;
  if (weight_decay != 0) {
    if (decoupled)
      at::_foreach_mul_(t.params, 1 - lr * weight_decay);
    else
      grads = at::_foreach_add(t.grads, t.params, weight_decay);
  }
  at::_foreach_mul_(t.exp_avgs, beta1);
  at::_foreach_add_(t.exp_avgs, grads, 1 - beta1);
  at::_foreach_mul_(t.exp_avg_sqs, beta2);
  at::_foreach_addcmul_(t.exp_avg_sqs, grads, grads, 1 - beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(t.exp_avg_sqs);
  at::_foreach_div_(denom, std::sqrt(bias_correction2));
  at::_foreach_add_(denom, eps);
  at::_foreach_addcdiv_(t.params, t.exp_avgs, denom, -(lr / bias_correction1));
}

// A LibTorch whose Adam options know more than these (a later one's decoupled_weight_decay,
// say) steps on its own whenever such an option is on.
template <typename O, typename = void>
struct HasDecoupledWeightDecay : std::false_type {};
template <typename O>
struct HasDecoupledWeightDecay<O,
                               std::void_t<decltype(std::declval<O&>().decoupled_weight_decay())>>
    : std::true_type {};

template <typename Options>
bool takes(Options& o) {
  if (o.amsgrad()) return false;
  if constexpr (HasDecoupledWeightDecay<Options>::value) {
    if (o.decoupled_weight_decay()) return false;
  }
  return true;
}

template <typename Options, typename State>
bool stepAll(torch::optim::Optimizer& optimizer, bool decoupled) {
  std::vector<GroupTensors<State>> groups(optimizer.param_groups().size());
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    if (!takes(static_cast<Options&>(group.options()))) return false;
    if (!collect(optimizer, group, groups[g])) return false;
  }
  at::NoGradGuard noGrad;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& o = static_cast<Options&>(optimizer.param_groups()[g].options());
    stepGroup(groups[g], o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(),
              o.weight_decay(), decoupled);
  }
  return true;
}

}  // namespace

template <typename Key>
Key keyOf(const at::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;  // c10::guts::to_string's, as LibTorch 1.x's optimizers key it
    key << param.unsafeGetTensorImpl();
    return key.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

OptimizerStateKey optimizerStateKey(const at::Tensor& param) {
  return keyOf<OptimizerStateKey>(param);
}

bool foreachAdamStep(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer))
    return stepAll<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(optimizer, true);
  if (dynamic_cast<torch::optim::Adam*>(&optimizer))
    return stepAll<torch::optim::AdamOptions, torch::optim::AdamParamState>(optimizer, false);
  return false;
}

}  // namespace accel::optim
