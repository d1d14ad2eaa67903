// The GPU checks that no fake queue can make (issue 35's five-minute check, run by
// scripts/gpu_check.sh on a machine with an NVIDIA GPU): one line "PASS name" or "FAIL name:
// why" per check, exit 1 when any failed. Built with the NCCL communicator only; it has not run
// where it was written (no GPU there): read its first output as a first run.
//
//   stream_order   an all-gather after `at::cuda::sleep` (~1 s) and `fill_(7)` on the caller's
//                  stream: the gathered part is all 7 (the collective waited for the caller), and
//                  its sum read without synchronize() is 7 n (the caller waited for it)
//   gradient_sync  GradientSync on a world-1 NCCL communicator, 3 buckets, bf16 compression off
//                  and on, 20 steps: the gradients equal the unsynced ones (bf16-rounded with
//                  compression) and no hook throws on autograd's device thread
//   bucket_views   gradients as bucket views on the GPU (the default) against copying into the
//                  buckets, two identical models, 20 SGD steps with zeroGradients: the parameters
//                  equal bit for bit, and backward wrote every gradient into one of the 3
//                  buckets' storages (without views: one storage each)
//   fp16_resume    fp16: 3 steps, saveState, a CUDA randn; loadState into a fresh model: the same
//                  randn, the same parameters, the optimizer state on the GPU, the scaler's scale
//                  and growth tracker restored

#include <stdlib.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "accel/accelerator.h"
#include "accel/error.h"
#include "libaccel/comm/nccl_communicator.h"
#include "libaccel/sync/gradient_sync.h"

namespace accel {
namespace {

int failures = 0;

void check(const std::string& name, const std::function<std::string()>& body) {
  std::string why;
  try {
    why = body();
  } catch (const std::exception& e) {
    why = std::string("threw: ") + e.what();
  }
  std::cout << (why.empty() ? "PASS " + name : "FAIL " + name + ": " + why) << std::endl;
  if (!why.empty()) ++failures;
}

std::shared_ptr<Communicator> worldOfOne() {
  return comm::makeNcclCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0,
                                    std::chrono::seconds(60));
}

std::string streamOrder() {
  auto comm = worldOfOne();
  const int64_t n = 1 << 20;
  at::Tensor x = torch::empty({n}, torch::device(torch::kCUDA));
  at::cuda::sleep(2000000000LL);  // ~1 s of GPU clock cycles on the caller's stream
  x.fill_(7);
  std::vector<at::Tensor> parts = comm->allgather(x);
  // No synchronize(): reading on the host waits for the caller's stream, which waits for the
  // all-gather's event.
  const double sum = parts.at(0).sum().item<double>();
  if (sum != 7.0 * n) return "the gathered sum is " + std::to_string(sum) + ", not 7 n";
  if (!torch::equal(parts[0], torch::full({n}, 7.0f, torch::device(torch::kCUDA))))
    return "the gathered part is not all 7 (the all-gather did not wait for fill_)";
  return "";
}

// A small MLP on the GPU, its weights drawn from `seed`, whose gradients fill three buckets of
// threeBuckets().
torch::nn::Sequential smallModel(uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential model(torch::nn::Linear(64, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 10));
  model->to(torch::kCUDA);
  return model;
}

sync::GradientSyncOptions threeBuckets() {
  sync::GradientSyncOptions o;
  o.bucket_cap_bytes = 256 * 256 * 4;
  return o;
}

std::string gradientSync(bool bf16) {
  auto comm = worldOfOne();
  torch::nn::Sequential model = smallModel(5);
  std::vector<at::Tensor> params = model->parameters();
  sync::GradientSyncOptions o = threeBuckets();
  o.bf16_compression = bf16;
  sync::GradientSync sync(*comm, params, {}, o);
  if (sync.numBuckets() != 3) return std::to_string(sync.numBuckets()) + " buckets, not 3";
  for (int step = 0; step < 20; ++step) {
    at::Tensor x = torch::randn({32, 64}, torch::device(torch::kCUDA));
    auto loss = [&] { return model->forward(x).pow(2).mean(); };
    sync.setEnabled(false);
    for (auto& p : params) p.mutable_grad().reset();
    loss().backward();
    std::vector<at::Tensor> local;
    for (auto& p : params) local.push_back(p.grad().clone());
    for (auto& p : params) p.mutable_grad().reset();
    sync.setEnabled(true);
    loss().backward();  // a hook that threw would surface here
    sync.finish();
    for (size_t k = 0; k < params.size(); ++k) {
      at::Tensor want = bf16 ? local[k].to(at::kBFloat16).to(at::kFloat) : local[k];
      if (!torch::equal(params[k].grad(), want))
        return "step " + std::to_string(step) + ": parameter " + std::to_string(k) +
               "'s gradient differs from the unsynced one";
    }
  }
  return "";
}

// One model's 20 SGD steps under a GradientSync with or without bucket views; returns the
// parameters, and in `storages` how many distinct storages the last backward left the gradients in.
std::vector<at::Tensor> sgdSteps(bool views, size_t* storages) {
  auto comm = worldOfOne();
  torch::nn::Sequential model = smallModel(11);
  std::vector<at::Tensor> params = model->parameters();
  sync::GradientSyncOptions o = threeBuckets();
  o.gradient_as_bucket_view = views;
  sync::GradientSync sync(*comm, params, {}, o);
  for (int step = 0; step < 20; ++step) {
    at::Tensor x = torch::randn({32, 64}, torch::device(torch::kCUDA));
    model->forward(x).pow(2).mean().backward();
    sync.finish();
    torch::NoGradGuard noGrad;
    for (auto& p : params) p.sub_(p.grad(), 0.01);
    if (views) {
      sync.zeroGradients();
    } else {
      for (auto& p : params) p.mutable_grad().reset();
    }
  }
  // Where backward left the gradients, before finish() (which makes every .grad a bucket view).
  model->forward(torch::randn({32, 64}, torch::device(torch::kCUDA))).pow(2).mean().backward();
  std::set<const void*> distinct;
  for (auto& p : params) distinct.insert(p.grad().storage().data());
  *storages = distinct.size();
  sync.finish();
  std::vector<at::Tensor> out;
  for (auto& p : params) out.push_back(p.detach().clone());
  return out;
}

std::string bucketViews() {
  size_t viewStorages = 0, copyStorages = 0;
  const auto viewed = sgdSteps(true, &viewStorages);
  const auto copied = sgdSteps(false, &copyStorages);
  for (size_t k = 0; k < viewed.size(); ++k) {
    if (!torch::equal(viewed[k], copied[k]))
      return "parameter " + std::to_string(k) + " differs from the copying path's after 20 steps";
  }
  if (viewStorages != 3)
    return "backward left the gradients in " + std::to_string(viewStorages) +
           " storages, not the 3 buckets";
  if (copyStorages != viewed.size())
    return "without views backward left the gradients in " + std::to_string(copyStorages) +
           " storages, not one each";
  return "";
}

struct Run {
  torch::nn::Linear model{nullptr};
  std::unique_ptr<torch::optim::Adam> opt;
  std::unique_ptr<Accelerator> acc;
};

Run fp16Run() {
  setenv("ACCELERATE_MIXED_PRECISION", "fp16", 1);
  Run r;
  r.acc = std::make_unique<Accelerator>();
  unsetenv("ACCELERATE_MIXED_PRECISION");
  r.model = torch::nn::Linear(16, 4);
  r.opt = std::make_unique<torch::optim::Adam>(r.model->parameters(), 1e-2);
  r.acc->prepare(*r.model, *r.opt);
  return r;
}

std::string fp16Resume() {
  char dirTemplate[] = "/tmp/accel-gpu-check-XXXXXX";
  const std::string dir = ::mkdtemp(dirTemplate);
  Run first = fp16Run();
  for (int step = 0; step < 3; ++step) {
    first.acc->accumulate();
    {
      auto cast = first.acc->autocast();
      first.acc->backward(first.model->forward(torch::ones({8, 16}, torch::kCUDA)).pow(2).sum());
    }
    first.acc->step();
  }
  first.acc->saveState(dir + "/ckpt");
  const at::Tensor expected = torch::randn({4}, torch::device(torch::kCUDA));
  Run second = fp16Run();
  second.acc->loadState(dir + "/ckpt");
  const at::Tensor drawn = torch::randn({4}, torch::device(torch::kCUDA));
  std::system(("rm -rf '" + dir + "'").c_str());
  if (!torch::equal(drawn, expected)) return "the CUDA generator's state was not restored";
  if (!torch::equal(second.model->weight, first.model->weight)) return "the weights differ";
  for (const auto& [key, state] : second.opt->state()) {
    auto& adam = static_cast<torch::optim::AdamParamState&>(*state);
    if (!adam.exp_avg().is_cuda()) return "the optimizer's state is not on the GPU";
  }
  if (second.acc->scaler().currentScale() != first.acc->scaler().currentScale())
    return "the scaler's scale was not restored";
  if (second.acc->scaler().growthTracker() != first.acc->scaler().growthTracker())
    return "the scaler's growth tracker was not restored";
  return "";
}

}  // namespace
}  // namespace accel

int main() {
  using accel::check;
  const std::string why = accel::comm::cudaUnavailableReason();
  if (!why.empty()) {
    std::cout << "FAIL gpu: no usable NVIDIA GPU: " << why << std::endl;
    return 1;
  }
  check("stream_order", accel::streamOrder);
  check("gradient_sync (fp32 buckets)", [] { return accel::gradientSync(false); });
  check("gradient_sync (bf16 compression)", [] { return accel::gradientSync(true); });
  check("bucket_views (bit for bit the copying path's)", accel::bucketViews);
  check("fp16_resume", accel::fp16Resume);
  return accel::failures == 0 ? 0 : 1;
}
