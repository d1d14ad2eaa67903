#pragma once
// The two models of the Fashion-MNIST example.

// The modules used, not <torch/torch.h>: that header (every module, optimizer, JIT and data API)
// costs about 25 s of each compile on its own.
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace accel::examples {

// 784-512-512-10 with ReLU.
struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 512));
    fc2 = register_module("fc2", torch::nn::Linear(512, 512));
    fc3 = register_module("fc3", torch::nn::Linear(512, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::relu(fc1(x.flatten(1)));
    return fc3(torch::relu(fc2(h)));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

// conv 1→32 3×3 p1, ReLU, maxpool 2, conv 32→64 3×3 p1, ReLU, maxpool 2, fc 3136→128, ReLU,
// fc 128→10.
struct CnnImpl : torch::nn::Module {
  CnnImpl() {
    conv1 =
        register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    conv2 =
        register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    fc1 = register_module("fc1", torch::nn::Linear(3136, 128));
    fc2 = register_module("fc2", torch::nn::Linear(128, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv1(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2(h)), 2);
    return fc2(torch::relu(fc1(h.flatten(1))));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace accel::examples
