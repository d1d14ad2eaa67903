// The foreach Adam/AdamW step against LibTorch's own, and the step profile's marks.

#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "accel/accelerator.h"
#include "accel/step_profile.h"
#include "libaccel/optim/foreach_adam.h"

namespace accel {
namespace {

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

std::shared_ptr<Net> makeNet() {
  torch::manual_seed(7);
  return std::make_shared<Net>();
}

void backwardOn(Net& net, int step) {
  torch::manual_seed(100 + step);
  net.zero_grad();
  net.forward(torch::randn({5, 8})).pow(2).sum().backward();
}

// Five steps of `make(params)` on two copies of one net, one stepped by LibTorch, the other by
// foreachAdamStep: parameters and state equal bit for bit (on the CPU the _foreach_ operations
// are LibTorch's per-tensor ones, so any difference is the step's own logic).
template <typename Make>
void expectSameAsLibTorch(Make make) {
  auto a = makeNet(), b = makeNet();
  auto optA = make(a->parameters()), optB = make(b->parameters());
  for (int step = 0; step < 5; ++step) {
    backwardOn(*a, step);
    backwardOn(*b, step);
    optA->step();
    ASSERT_TRUE(optim::foreachAdamStep(*optB)) << "step " << step;
  }
  const auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "param " << i;
  ASSERT_EQ(optA->state().size(), optB->state().size());
  for (size_t i = 0; i < pa.size(); ++i) {
    auto& sa = *optA->state().at(optim::optimizerStateKey(pa[i]));
    auto& sb = *optB->state().at(optim::optimizerStateKey(pb[i]));
    using State = std::remove_reference_t<decltype(*optA)>;
    if constexpr (std::is_same_v<State, torch::optim::AdamW>) {
      auto& x = static_cast<torch::optim::AdamWParamState&>(sa);
      auto& y = static_cast<torch::optim::AdamWParamState&>(sb);
      EXPECT_EQ(x.step(), y.step());
      EXPECT_TRUE(torch::equal(x.exp_avg_sq(), y.exp_avg_sq())) << "param " << i;
    } else {
      auto& x = static_cast<torch::optim::AdamParamState&>(sa);
      auto& y = static_cast<torch::optim::AdamParamState&>(sb);
      EXPECT_EQ(x.step(), y.step());
      EXPECT_EQ(x.step(), 5);
      EXPECT_TRUE(torch::equal(x.exp_avg(), y.exp_avg())) << "param " << i;
    }
  }
}

TEST(ForeachAdamTest, AdamStepsAsLibTorchDoes) {
  expectSameAsLibTorch([](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(1e-2));
  });
}

TEST(ForeachAdamTest, AdamWithWeightDecayStepsAsLibTorchDoes) {
  expectSameAsLibTorch([](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(
        p, torch::optim::AdamOptions(1e-2).weight_decay(0.1).betas({0.8, 0.99}).eps(1e-6));
  });
}

TEST(ForeachAdamTest, AdamWStepsAsLibTorchDoes) {
  expectSameAsLibTorch([](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(1e-2));
  });
}

TEST(ForeachAdamTest, OtherOptimizersAndAmsgradAreLeftToLibTorch) {
  auto net = makeNet();
  backwardOn(*net, 0);
  const auto before = net->parameters()[0].clone();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  EXPECT_FALSE(optim::foreachAdamStep(sgd));
  torch::optim::Adam ams(net->parameters(), torch::optim::AdamOptions(1e-2).amsgrad(true));
  EXPECT_FALSE(optim::foreachAdamStep(ams));
  EXPECT_TRUE(torch::equal(net->parameters()[0], before)) << "nothing stepped";
}

// Under the Accelerator (forced on, as on a GPU) the same training as without it.
TEST(ForeachAdamTest, TheAcceleratorStepsAdamThroughIt) {
  auto run = [](std::optional<bool> foreach) {
    AcceleratorOptions o;
    o.communicator = makeSingleProcessCommunicator();
    o.local_rank = 0;
    o.foreach_optimizer = foreach;
    Accelerator acc(o);
    auto net = makeNet();
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-2));
    acc.prepare(*net, opt);
    for (int step = 0; step < 3; ++step) {
      acc.accumulate();
      torch::manual_seed(100 + step);
      acc.backward(net->forward(torch::randn({5, 8})).pow(2).sum());
      acc.step();
    }
    return net->parameters()[0].clone();
  };
  const auto plain = run(false), foreach = run(true);
  EXPECT_TRUE(torch::equal(plain, foreach));
  EXPECT_FALSE(torch::equal(plain, makeNet()->parameters()[0])) << "it trained";
}

// The profile attributes the time between marks to the phase each mark ends, leaves out the
// skipped steps, and counts the loop's time after a step's last mark as "other".
TEST(StepProfileTest, PhasesGetTheTimeBetweenTheirMarks) {
  StepProfile profile(torch::kCPU, /*skipSteps=*/1);
  auto busy = [](double ms) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  for (int step = 0; step < 3; ++step) {
    profile.beginStep();
    busy(step == 0 ? 40 : 2);  // the skipped step is slow: it must not count
    profile.mark(StepPhase::Data);
    busy(6);
    profile.mark(StepPhase::Forward);
    profile.mark(StepPhase::Optimizer);  // no backward or sync marked: 0
    busy(3);                             // the loop's own work
  }
  const auto r = profile.report();
  EXPECT_FALSE(r.device_events);
  EXPECT_EQ(r.steps, 2);
  EXPECT_GE(r.ms[static_cast<size_t>(StepPhase::Data)], 2.0);
  EXPECT_LT(r.ms[static_cast<size_t>(StepPhase::Data)], 20.0);
  EXPECT_GE(r.ms[static_cast<size_t>(StepPhase::Forward)], 6.0);
  EXPECT_EQ(r.ms[static_cast<size_t>(StepPhase::Backward)], 0.0);
  EXPECT_EQ(r.ms[static_cast<size_t>(StepPhase::Sync)], 0.0);
  // Step 1 ends where step 2 begins (its 3 ms of loop work are "other"); the last step ends at
  // its last mark.
  EXPECT_GE(r.otherMs(), 1.5);
  EXPECT_GE(r.step_ms, 8.0 + 1.5);
  EXPECT_NE(r.text().find("data "), std::string::npos);
}

// The Accelerator marks backward, sync (several processes only) and optimizer.
TEST(StepProfileTest, TheAcceleratorMarksItsPhases) {
  AcceleratorOptions o;
  o.communicator = makeSingleProcessCommunicator();
  o.local_rank = 0;
  Accelerator acc(o);
  auto net = makeNet();
  torch::optim::SGD opt(net->parameters(), 0.1);
  acc.prepare(*net, opt);
  StepProfile profile(acc.device(), 0);
  acc.profileSteps(&profile);
  for (int step = 0; step < 2; ++step) {
    profile.beginStep();
    acc.accumulate();
    acc.backward(net->forward(torch::randn({256, 8})).pow(2).sum());
    acc.step();
  }
  acc.profileSteps(nullptr);
  const auto r = profile.report();
  EXPECT_EQ(r.steps, 2);
  EXPECT_GT(r.ms[static_cast<size_t>(StepPhase::Backward)], 0.0);
  EXPECT_GT(r.ms[static_cast<size_t>(StepPhase::Optimizer)], 0.0);
  EXPECT_EQ(r.ms[static_cast<size_t>(StepPhase::Sync)], 0.0);
}

}  // namespace
}  // namespace accel
