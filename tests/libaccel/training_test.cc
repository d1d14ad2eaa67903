// Data-parallel training equals single-process training on the same data: gradient sync,
// accumulation, unused parameters, checkpoints and the loss scaler.

#include <cstdlib>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "accel/accelerator.h"
#include "libaccel/common/error.h"
#include "libaccel/sync/gradient_sync.h"
#include "tests/libaccel/world.h"

namespace accel {
namespace {

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

struct Data {
  torch::Tensor x, y;
};

Data makeData(int64_t rows) {
  torch::manual_seed(123);
  return {torch::randn({rows, 8}), torch::randn({rows, 2})};
}

std::shared_ptr<Net> makeNet(uint64_t seed = 0) {
  torch::manual_seed(seed);
  return std::make_shared<Net>();
}

AcceleratorOptions options(std::shared_ptr<Communicator> comm, int rank, int accumulation = 1) {
  AcceleratorOptions o;
  o.communicator = std::move(comm);
  o.local_rank = rank;
  o.mixed_precision = MixedPrecision::No;
  o.gradient_accumulation_steps = accumulation;
  o.bucket_cap_bytes = 256;  // several buckets even for this small model
  return o;
}

// Trains `steps` optimizer steps; each micro-step this rank takes `rows` rows of its share.
// Global step s covers rows [s*G, (s+1)*G) with G = rows × world × accumulation.
void train(Accelerator& acc, Net& net, const Data& data, int steps, int64_t rows,
           int firstStep = 0) {
  const int world = acc.numProcesses(), k = acc.gradientAccumulationSteps();
  const int64_t global = rows * world * k;
  for (int s = firstStep; s < firstStep + steps; ++s) {
    for (int micro = 0; micro < k; ++micro) {
      acc.accumulate();
      int64_t start = s * global + (micro * world + acc.processIndex()) * rows;
      auto x = data.x.narrow(0, start, rows), y = data.y.narrow(0, start, rows);
      acc.backward(torch::mse_loss(net.forward(x), y));
      acc.step();
    }
  }
}

std::vector<torch::Tensor> snapshot(Net& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

void expectClose(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-5))
        << what << ": parameter " << i << " differs by " << (a[i] - b[i]).abs().max().item<float>();
  }
}

// One process, batch `rows`, `steps` steps: the reference.
std::vector<torch::Tensor> reference(const Data& data, int steps, int64_t rows) {
  auto net = makeNet();
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  AcceleratorOptions o;
  o.communicator = makeSingleProcessCommunicator();
  o.mixed_precision = MixedPrecision::No;
  o.gradient_accumulation_steps = 1;
  Accelerator acc(o);
  acc.prepare(*net, opt);
  train(acc, *net, data, steps, rows);
  return snapshot(*net);
}

// `world` ranks as threads, each with batch `rows` and `accumulation` micro-steps per step.
std::vector<std::vector<torch::Tensor>> distributed(const Data& data, int world, int steps, int64_t rows,
                                                    int accumulation) {
  std::vector<std::shared_ptr<Net>> nets;
  for (int r = 0; r < world; ++r) nets.push_back(makeNet(r == 0 ? 0 : 99 + r));  // prepare() broadcasts rank 0's
  std::vector<std::vector<torch::Tensor>> result(static_cast<size_t>(world));
  testing::runRanks(world, [&](std::shared_ptr<Communicator> comm, int rank) {
    Net& net = *nets[static_cast<size_t>(rank)];
    torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    Accelerator acc(options(comm, rank, accumulation));
    acc.prepare(net, opt);
    train(acc, net, data, steps, rows);
    result[static_cast<size_t>(rank)] = snapshot(net);
  });
  return result;
}

TEST(TrainingTest, TwoRanksMatchOneRankWithTwiceTheBatch) {
  auto data = makeData(64);
  auto expected = reference(data, 4, 8);
  auto ranks = distributed(data, 2, 4, 4, 1);
  expectClose(ranks[0], expected, "rank 0 vs 1 process");
  expectClose(ranks[1], ranks[0], "rank 1 vs rank 0");
}

TEST(TrainingTest, ThreeRanks) {
  auto data = makeData(72);
  auto expected = reference(data, 3, 6);
  auto ranks = distributed(data, 3, 3, 2, 1);
  for (auto& r : ranks) expectClose(r, expected, "3 ranks vs 1 process");
}

TEST(TrainingTest, AccumulationMatchesALargerBatch) {
  auto data = makeData(64);
  auto expected = reference(data, 4, 8);
  expectClose(distributed(data, 1, 4, 4, 2)[0], expected, "1 rank, 2 micro-steps of 4");
  auto ranks = distributed(data, 2, 4, 2, 2);
  expectClose(ranks[0], expected, "2 ranks, 2 micro-steps of 2");
  expectClose(ranks[1], expected, "2 ranks, 2 micro-steps of 2 (rank 1)");
}

TEST(TrainingTest, AccumulationSkipsSyncAndSteps) {
  AcceleratorOptions o;
  o.communicator = makeSingleProcessCommunicator();
  o.mixed_precision = MixedPrecision::No;
  o.gradient_accumulation_steps = 3;
  Accelerator acc(o);
  auto net = makeNet();
  torch::optim::SGD opt(net->parameters(), 0.1);
  acc.prepare(*net, opt);
  std::vector<bool> syncs;
  for (int i = 0; i < 7; ++i) syncs.push_back(acc.accumulate(i == 6));
  EXPECT_EQ(syncs, (std::vector<bool>{false, false, true, false, false, true, true}));  // k-th steps and the last
  acc.accumulate();
  auto before = snapshot(*net);
  acc.backward(net->forward(torch::ones({1, 8})).sum());
  EXPECT_FALSE(acc.step());  // not a sync step: no update
  expectClose(snapshot(*net), before, "accumulation step");
}

struct WithUnused : torch::nn::Module {
  WithUnused() {
    used = register_module("used", torch::nn::Linear(4, 1));
    unused = register_module("unused", torch::nn::Linear(4, 1));
  }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};

TEST(TrainingTest, ParametersWithoutGradientAreAnErrorUnlessAllowed) {
  for (bool allow : {false, true}) {
    std::vector<std::shared_ptr<WithUnused>> nets{std::make_shared<WithUnused>(), std::make_shared<WithUnused>()};
    testing::runRanks(2, [&](std::shared_ptr<Communicator> comm, int rank) {
      auto& net = *nets[static_cast<size_t>(rank)];
      torch::optim::SGD opt(net.parameters(), 0.1);
      auto o = options(comm, rank);
      o.find_unused_parameters = allow;
      Accelerator acc(o);
      acc.prepare(net, opt);
      acc.accumulate();
      auto loss = net.used(torch::ones({2, 4})).sum();
      if (allow) {
        acc.backward(loss);
        EXPECT_TRUE(acc.step());
        return;
      }
      try {
        acc.backward(loss);
        ADD_FAILURE() << "no error for unused parameters";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "parameters received no gradient in this backward: unused.bias, unused.weight; every rank must use "
                  "every parameter, or enable find_unused_parameters");
      }
    });
  }
}

// A world of two simulated in one process, which records when all-reduces start.
class RecordingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::unique_ptr<Work> allreduceAsync(at::Tensor& t, ReduceOp) override {
    ++started;
    t.mul_(2);  // as if the other rank had the same gradients
    struct Done : Work {
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  void broadcast(at::Tensor&, int) override {}
  std::vector<at::Tensor> allgather(const at::Tensor& t) override { return {t, t}; }
  void barrier() override {}
  int started = 0;
};

TEST(GradientSyncTest, BucketsStartDuringBackwardInReverseOrder) {
  auto net = makeNet();
  RecordingCommunicator comm;
  std::vector<at::Tensor> params = net->parameters();
  sync::GradientSync gs(comm, params, {}, sync::GradientSyncOptions{/*bucket_cap_bytes=*/100, false});
  ASSERT_GE(gs.numBuckets(), 3u);
  torch::mse_loss(net->forward(torch::ones({4, 8})), torch::zeros({4, 2})).backward();
  // Every bucket's all-reduce was started by the hooks, before backward returned.
  EXPECT_EQ(comm.started, static_cast<int>(gs.numBuckets()));
  auto local = snapshot(*net);
  std::vector<at::Tensor> grads;
  for (auto& p : params) grads.push_back(p.grad().clone());
  gs.finish();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), grads[i])) << "averaged gradient of " << i;
  }
  // Not synchronising: no collective at all.
  gs.setEnabled(false);
  comm.started = 0;
  torch::mse_loss(net->forward(torch::ones({4, 8})), torch::zeros({4, 2})).backward();
  gs.finish();
  EXPECT_EQ(comm.started, 0);
}

TEST(CheckpointTest, ResumedTrainingMatchesUninterrupted) {
  auto data = makeData(64);
  char tmpl[] = "/tmp/accel-ckpt-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::vector<std::vector<torch::Tensor>> uninterrupted(2), resumed(2);
  std::vector<std::shared_ptr<Net>> first{makeNet(), makeNet()}, second{makeNet(7), makeNet(8)};
  testing::runRanks(2, [&](std::shared_ptr<Communicator> comm, int rank) {
    auto& net = *first[static_cast<size_t>(rank)];
    torch::optim::Adam opt(net.parameters(), 1e-2);
    Accelerator acc(options(comm, rank));
    acc.prepare(net, opt);
    train(acc, net, data, 2, 4);
    acc.saveState(dir);
    train(acc, net, data, 2, 4, 2);
    uninterrupted[static_cast<size_t>(rank)] = snapshot(net);
  });
  testing::runRanks(2, [&](std::shared_ptr<Communicator> comm, int rank) {
    auto& net = *second[static_cast<size_t>(rank)];
    torch::optim::Adam opt(net.parameters(), 1e-2);
    Accelerator acc(options(comm, rank));
    acc.prepare(net, opt);
    acc.loadState(dir);
    EXPECT_EQ(acc.stepCount(), 2);
    train(acc, net, data, 2, 4, 2);
    resumed[static_cast<size_t>(rank)] = snapshot(net);
  });
  expectClose(resumed[0], uninterrupted[0], "resumed vs uninterrupted");
  // A different number of processes restores model and optimizer.
  auto single = makeNet(5);
  torch::optim::Adam opt(single->parameters(), 1e-2);
  AcceleratorOptions o;
  o.communicator = makeSingleProcessCommunicator();
  o.mixed_precision = MixedPrecision::No;
  Accelerator acc(o);
  acc.prepare(*single, opt);
  acc.loadState(dir);
  train(acc, *single, data, 2, 8, 2);
  expectClose(snapshot(*single), uninterrupted[0], "1 process resumed from a 2-process checkpoint");
  EXPECT_THROW(acc.loadState("/nonexistent/ckpt"), Error);
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(GradScalerTest, BacksOffOnInfAndGrowsAfterTheInterval) {
  GradScalerOptions o;
  o.growth_interval = 3;
  GradScaler scaler(o);
  auto comm = makeSingleProcessCommunicator();
  EXPECT_EQ(scaler.currentScale(), 65536.0);
  EXPECT_DOUBLE_EQ(scaler.scale(torch::ones({1})).item<double>(), 65536.0);
  auto finite = torch::full({2}, 65536.0f);
  EXPECT_FALSE(scaler.unscale({finite}, *comm));
  EXPECT_FLOAT_EQ(finite[0].item<float>(), 1.0f);
  auto broken = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
  EXPECT_TRUE(scaler.unscale({broken}, *comm));
  scaler.update(true);
  EXPECT_EQ(scaler.currentScale(), 32768.0);
  EXPECT_TRUE(scaler.unscale({torch::tensor({std::nanf("")})}, *comm));
  scaler.update(true);
  EXPECT_EQ(scaler.currentScale(), 16384.0);
  for (int i = 0; i < 2; ++i) scaler.update(false);
  EXPECT_EQ(scaler.currentScale(), 16384.0);
  scaler.update(false);  // the third finite step in a row
  EXPECT_EQ(scaler.currentScale(), 32768.0);
  EXPECT_EQ(scaler.growthTracker(), 0);
}

TEST(GradScalerTest, AnyRankWithInfSkipsEveryRank) {
  testing::runRanks(2, [](std::shared_ptr<Communicator> comm, int rank) {
    GradScaler scaler;
    auto g = rank == 1 ? torch::tensor({std::numeric_limits<float>::infinity()}) : torch::ones({1});
    EXPECT_TRUE(scaler.unscale({g}, *comm)) << "rank " << rank;
  });
}

TEST(GradScalerTest, DefaultsMatchTorch) {
  GradScalerOptions o;
  EXPECT_EQ(o.init_scale, 65536.0);
  EXPECT_EQ(o.growth_factor, 2.0);
  EXPECT_EQ(o.backoff_factor, 0.5);
  EXPECT_EQ(o.growth_interval, 2000);
}

}  // namespace
}  // namespace accel
