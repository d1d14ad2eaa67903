// Data-parallel training equals single-process training on the same data: gradient sync,
// accumulation, unused parameters, checkpoints and the loss scaler.

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "accel/accelerator.h"
#include "accel/error.h"
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

void expectClose(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b,
                 const char* what) {
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
std::vector<std::vector<torch::Tensor>> distributed(const Data& data, int world, int steps,
                                                    int64_t rows, int accumulation,
                                                    CpuBackend backend = testing::kCpuBackend) {
  std::vector<std::shared_ptr<Net>> nets;
  for (int r = 0; r < world; ++r)
    nets.push_back(makeNet(r == 0 ? 0 : 99 + r));  // prepare() broadcasts rank 0's
  std::vector<std::vector<torch::Tensor>> result(static_cast<size_t>(world));
  testing::runRanks(
      world,
      [&](std::shared_ptr<Communicator> comm, int rank) {
        Net& net = *nets[static_cast<size_t>(rank)];
        torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
        Accelerator acc(options(comm, rank, accumulation));
        acc.prepare(net, opt);
        train(acc, net, data, steps, rows);
        result[static_cast<size_t>(rank)] = snapshot(net);
      },
      std::chrono::seconds(30), backend);
  return result;
}

// On Gloo and on shared memory alike (whose sums are as exact).
class TwoRanksTest : public ::testing::TestWithParam<CpuBackend> {};

TEST_P(TwoRanksTest, MatchOneRankWithTwiceTheBatch) {
  auto data = makeData(64);
  auto expected = reference(data, 4, 8);
  auto ranks = distributed(data, 2, 4, 4, 1, GetParam());
  expectClose(ranks[0], expected, "rank 0 vs 1 process");
  expectClose(ranks[1], ranks[0], "rank 1 vs rank 0");
}

INSTANTIATE_TEST_SUITE_P(Backends, TwoRanksTest, ::testing::ValuesIn(testing::cpuBackends()),
                         [](const auto& info) {
                           return std::string(testing::backendName(info.param));
                         });

TEST(TrainingTest, ThreeRanksOnSharedMemoryWithAccumulation) {
  auto data = makeData(72);
  auto expected = reference(data, 3, 6);
  auto ranks = distributed(data, 3, 3, 1, 2, CpuBackend::SharedMemory);
  for (auto& r : ranks) expectClose(r, expected, "3 ranks (shm), 2 micro-steps of 1 vs 1 process");
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
  EXPECT_EQ(syncs, (std::vector<bool>{false, false, true, false, false, true,
                                      true}));  // k-th steps and the last
  acc.accumulate();
  auto before = snapshot(*net);
  acc.backward(net->forward(torch::ones({1, 8})).sum());
  EXPECT_FALSE(acc.step());  // not a sync step: no update
  expectClose(snapshot(*net), before, "accumulation step");
}

// lastStepTimes: on an accumulation step only backward's time (no wait for all-reduces, no
// optimizer); on a sync step of two ranks all three, the backward long enough to be seen.
TEST(TrainingTest, StepTimesSayWhereTheStepWent) {
  testing::runRanks(2, [&](std::shared_ptr<Communicator> comm, int rank) {
    AcceleratorOptions o = testing::optionsFor(comm, rank);
    o.gradient_accumulation_steps = 2;
    Accelerator acc(o);
    auto net = makeNet();
    torch::optim::SGD opt(net->parameters(), 0.1);
    acc.prepare(*net, opt);
    for (int i = 0; i < 2; ++i) {
      const bool sync = acc.accumulate();
      EXPECT_EQ(sync, i == 1);  // every 2nd step synchronises
      acc.backward(net->forward(torch::ones({16, 8})).sum());
      acc.step();
      const auto& t = acc.lastStepTimes();
      EXPECT_GT(t.backward, 0.0) << "step " << i;
      if (sync) {
        EXPECT_GT(t.sync, 0.0);
        EXPECT_GT(t.optimizer, 0.0);
      } else {
        EXPECT_EQ(t.sync, 0.0);
        EXPECT_EQ(t.optimizer, 0.0);
      }
      EXPECT_LT(t.backward + t.sync + t.optimizer, 10.0);
    }
  });
}

// noSync(): each rank's gradient is its own loss's (no all-reduce) and step() still steps; once
// the guard is gone the next backward averages again.
TEST(TrainingTest, NoSyncLeavesEachRanksGradientItsOwnAndStillSteps) {
  const auto data = makeData(8);
  // Made here, not in the ranks' threads: torch's seed is one for the whole process.
  std::vector<std::shared_ptr<Net>> nets{makeNet(), makeNet()}, twins{makeNet(), makeNet()};
  testing::runRanks(2, [&](std::shared_ptr<Communicator> comm, int rank) {
    Accelerator acc(options(comm, rank));
    auto net = nets[static_cast<size_t>(rank)], twin = twins[static_cast<size_t>(rank)];
    torch::optim::SGD opt(net->parameters(), 0.1);
    acc.prepare(*net, opt);
    const auto x = data.x.narrow(0, 4 * rank, 4), y = data.y.narrow(0, 4 * rank, 4);
    torch::mse_loss(twin->forward(x), y).backward();  // this rank's own gradient
    const auto own = twin->parameters();
    const auto before = snapshot(*net);
    EXPECT_TRUE(acc.accumulate());
    {
      auto noSync = acc.noSync();
      acc.backward(torch::mse_loss(net->forward(x), y));
      const auto params = net->parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(torch::allclose(params[i].grad(), own[i].grad(), 1e-6, 1e-6))
            << "rank " << rank << ", parameter " << i << ": not this rank's own gradient";
      }
      EXPECT_TRUE(acc.step());
    }
    const auto after = snapshot(*net);
    for (size_t i = 0; i < after.size(); ++i) {
      // SGD with lr 0.1 on this rank's own gradient.
      EXPECT_TRUE(torch::allclose(after[i], before[i] - 0.1 * own[i].grad(), 1e-6, 1e-6))
          << "rank " << rank << ", parameter " << i;
    }
    // The guard is gone: the next backward averages, so both ranks hold the same gradient.
    EXPECT_TRUE(acc.accumulate());
    acc.backward(torch::mse_loss(net->forward(x), y));
    for (const auto& p : net->parameters()) {
      const at::Tensor both = acc.gather(p.grad().unsqueeze(0));
      EXPECT_TRUE(torch::equal(both[0], both[1])) << "rank " << rank << ": gradients not averaged";
    }
  });
}

// step() releases .grad (zero_grad(set_to_none=True)) so the next backward stores its gradient;
// accumulation steps keep adding to it.
TEST(TrainingTest, StepReleasesGradientsAndAccumulationKeepsThem) {
  Accelerator acc(options(makeSingleProcessCommunicator(), 0, /*accumulation=*/2));
  auto net = makeNet(), twin = makeNet();  // same seed: same parameters until the first update
  torch::optim::SGD opt(net->parameters(), 0.1);
  acc.prepare(*net, opt);
  auto x1 = torch::ones({1, 8}), x2 = torch::full({1, 8}, 2.0);
  // The twin's gradients of the accumulated loss (each micro-step's loss ÷ 2).
  (twin->forward(x1).sum() / 2).backward();
  (twin->forward(x2).sum() / 2).backward();
  const auto expected = twin->parameters();

  EXPECT_FALSE(acc.accumulate());
  acc.backward(net->forward(x1).sum());
  EXPECT_FALSE(acc.step());
  EXPECT_TRUE(acc.accumulate());
  acc.backward(net->forward(x2).sum());
  const auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i << " before step";
    EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i].grad(), 1e-6, 1e-6))
        << "accumulated, parameter " << i;
  }
  EXPECT_TRUE(acc.step());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_FALSE(params[i].grad().defined()) << "parameter " << i << " after step";

  // The next gradient replaces nothing stale: it is this backward's alone.
  for (auto& p : twin->parameters()) p.mutable_grad().reset();
  {
    torch::NoGradGuard noGrad;
    for (size_t i = 0; i < params.size(); ++i) expected[i].copy_(params[i]);
  }
  EXPECT_FALSE(acc.accumulate());
  acc.backward(net->forward(x1).sum());
  (twin->forward(x1).sum() / 2).backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i].grad(), 1e-6, 1e-6))
        << "after release, parameter " << i;
  }
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
    std::vector<std::shared_ptr<WithUnused>> nets{std::make_shared<WithUnused>(),
                                                  std::make_shared<WithUnused>()};
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
                  "parameters received no gradient in this backward: unused.bias, unused.weight; "
                  "every rank must use "
                  "every parameter, or enable find_unused_parameters");
      }
    });
  }
}

// Rank 0 of a world of two simulated in one process, whose peer's gradients are always 3× its
// own (so the average is 2× its own); records what each all-reduce started with, in order.
class RecordingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* backend() const override { return "fake"; }
  std::unique_ptr<Work> allreduceAsync(at::Tensor& t, ReduceOp) override {
    started.push_back(t.clone());
    t.mul_(4);
    struct Done : Work {
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  void broadcast(at::Tensor&, int) override {}
  std::vector<at::Tensor> allgather(const at::Tensor& t) override { return {t, t}; }
  void barrier() override {}
  std::vector<at::Tensor> started;
};

// The gradients of `loss` for `params`, computed before any hook is installed; .grad is left
// undefined again.
std::vector<at::Tensor> localGradients(std::vector<at::Tensor>& params,
                                       const std::function<at::Tensor()>& loss) {
  loss().backward();
  std::vector<at::Tensor> out;
  for (auto& p : params) {
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    p.mutable_grad() = at::Tensor();
  }
  return out;
}

at::Tensor flat(const std::vector<at::Tensor>& tensors, std::initializer_list<size_t> which) {
  std::vector<at::Tensor> parts;
  for (size_t i : which) parts.push_back(tensors[i].reshape({-1}));
  return torch::cat(parts);
}

// A small net, its parameters, an MSE loss on fixed data, its gradients computed before any hook
// (local), and a recording communicator: what the GradientSync tests start from.
struct NetWithLoss {
  decltype(makeNet()) net = makeNet();
  std::vector<at::Tensor> params = net->parameters();
  std::function<at::Tensor()> loss = [this] {
    return torch::mse_loss(net->forward(torch::ones({4, 8})), torch::zeros({4, 2}));
  };
  std::vector<at::Tensor> local = localGradients(params, loss);
  RecordingCommunicator comm;
};

// params: fc1.weight (512 bytes), fc1.bias (64), fc2.weight (128), fc2.bias (8). With a cap of
// 140 bytes, reversed: [fc2.bias, fc2.weight], [fc1.bias], [fc1.weight] (alone, over the cap).
TEST(GradientSyncTest, BucketsStartDuringBackwardInReverseOrder) {
  NetWithLoss t;
  auto& [net, params, loss, local, comm] = t;
  sync::GradientSync gs(comm, params, {},
                        sync::GradientSyncOptions{/*bucket_cap_bytes=*/140, false});
  ASSERT_EQ(gs.numBuckets(), 3u);
  loss().backward();
  // Every bucket's all-reduce was started by the hooks, before backward returned, last layer
  // first, with each gradient divided by the world size (2) before the sum, as DDP's.
  ASSERT_EQ(comm.started.size(), 3u);
  EXPECT_TRUE(torch::equal(comm.started[0], flat(local, {3, 2}) * 0.5))
      << "bucket 0: fc2.bias, fc2.weight";
  EXPECT_TRUE(torch::equal(comm.started[1], flat(local, {1}) * 0.5)) << "bucket 1: fc1.bias";
  EXPECT_TRUE(torch::equal(comm.started[2], flat(local, {0}) * 0.5)) << "bucket 2: fc1.weight";
  gs.finish();
  EXPECT_EQ(comm.started.size(), 3u);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[i].grad(), local[i] * 2))
        << "the average written back to parameter " << i;
  }
  // Not synchronising: no collective at all, and .grad accumulates locally.
  gs.setEnabled(false);
  loss().backward();
  gs.finish();
  EXPECT_EQ(comm.started.size(), 3u);
  EXPECT_TRUE(torch::equal(params[3].grad(), local[3] * 3));
}

// The averages are views of their bucket, not copies (DDP's gradient_as_bucket_view); a synced
// backward whose .grad still holds the last average (nobody cleared it) reduces the sum of both
// and leaves the last average untouched by autograd's in-place add: (2L + L) / 2 × 4 = 6L,
// where adding into the bucket during its all-reduce would give 7L.
TEST(GradientSyncTest, GradientsAreViewsOfTheBucketAndASecondSyncDoesNotClobberThem) {
  NetWithLoss t;
  auto& [net, params, loss, local, comm] = t;
  sync::GradientSync gs(comm, params, {}, sync::GradientSyncOptions{});
  ASSERT_EQ(gs.numBuckets(), 1u);
  loss().backward();
  gs.finish();
  for (size_t i = 1; i < params.size(); ++i)
    EXPECT_TRUE(params[i].grad().is_alias_of(params[0].grad())) << "parameter " << i;
  loss().backward();
  gs.finish();
  ASSERT_EQ(comm.started.size(), 2u);
  EXPECT_TRUE(torch::equal(comm.started[1], flat(local, {3, 2, 1, 0}) * 1.5));
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(params[i].grad(), local[i] * 6)) << "parameter " << i;
}

// DDP's rule: a full bucket waits for every earlier bucket to start. Here fc2 (bucket 0) gets
// no gradient, so buckets 1 and 2, though full during backward, start only in finish(), after
// bucket 0 (zeros).
TEST(GradientSyncTest, AFullBucketWaitsForTheEarlierOnes) {
  auto net = makeNet();
  std::vector<at::Tensor> params = net->parameters();
  auto loss = [&] { return net->fc1(torch::ones({4, 8})).pow(2).sum(); };
  const auto local = localGradients(params, loss);
  RecordingCommunicator comm;
  sync::GradientSync gs(comm, params, {},
                        sync::GradientSyncOptions{/*bucket_cap_bytes=*/140, true});
  loss().backward();
  EXPECT_EQ(comm.started.size(), 0u) << "a bucket started before an earlier one";
  gs.finish();
  ASSERT_EQ(comm.started.size(), 3u);
  EXPECT_TRUE(torch::equal(comm.started[0], torch::zeros({34})));
  EXPECT_TRUE(torch::equal(comm.started[1], flat(local, {1}) * 0.5));
  EXPECT_TRUE(torch::equal(comm.started[2], flat(local, {0}) * 0.5));
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(params[i].grad(), local[i] * 2)) << i;
}

// DDP's bf16_compress_hook: the all-reduce moves the bucket as bf16, and the average written
// back is the bf16-rounded sum (exact here: ×4 of a bf16 value) divided in fp32.
TEST(GradientSyncTest, Bf16CompressionSendsBf16AndAveragesInFullPrecision) {
  NetWithLoss t;
  auto& [net, params, loss, local, comm] = t;
  sync::GradientSyncOptions o;
  o.bucket_cap_bytes = 1 << 20;
  o.bf16_compression = true;
  sync::GradientSync gs(comm, params, {}, o);
  loss().backward();
  gs.finish();
  ASSERT_EQ(comm.started.size(), 1u);
  EXPECT_EQ(comm.started[0].scalar_type(), at::kBFloat16);
  EXPECT_TRUE(torch::equal(comm.started[0], (flat(local, {3, 2, 1, 0}) * 0.5).to(at::kBFloat16)));
  bool anyRounded = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor rounded = local[i].to(at::kBFloat16).to(at::kFloat);
    EXPECT_TRUE(torch::equal(params[i].grad(), rounded * 2)) << "parameter " << i;
    anyRounded = anyRounded || !torch::equal(rounded, local[i]);
  }
  EXPECT_TRUE(anyRounded) << "the gradients were all bf16 already: the test proves nothing";
}

// Two real ranks on shared memory, different data: each gets the bf16 sum of both ranks' bf16
// gradients (accumulated in fp32, rounded once), halved.
TEST(GradientSyncTest, Bf16CompressionOverSharedMemory) {
  std::vector<std::vector<at::Tensor>> local(2), synced(2);
  testing::runRanks(
      2,
      [&](std::shared_ptr<Communicator> comm, int rank) {
        auto net = makeNet();
        std::vector<at::Tensor> params = net->parameters();
        auto loss = [&] {
          return torch::mse_loss(net->forward(torch::full({4, 8}, 1.0 + rank)),
                                 torch::zeros({4, 2}));
        };
        local[static_cast<size_t>(rank)] = localGradients(params, loss);
        sync::GradientSyncOptions o;
        o.bf16_compression = true;
        sync::GradientSync gs(*comm, params, {}, o);
        loss().backward();
        gs.finish();
        for (auto& p : params) synced[static_cast<size_t>(rank)].push_back(p.grad().clone());
      },
      std::chrono::seconds(30), CpuBackend::SharedMemory);
  for (size_t i = 0; i < local[0].size(); ++i) {
    const at::Tensor sum =
        local[0][i].to(at::kBFloat16).to(at::kFloat) + local[1][i].to(at::kBFloat16).to(at::kFloat);
    const at::Tensor expected = sum.to(at::kBFloat16).to(at::kFloat) * 0.5;
    EXPECT_TRUE(torch::equal(synced[0][i], expected)) << "parameter " << i;
    EXPECT_TRUE(torch::equal(synced[1][i], synced[0][i])) << "parameter " << i;
  }
}

// Gradients as bucket views (the default) against copying them into the buckets: two ranks on
// shared memory, six optimizer steps of Adam with two micro-steps each (the first under
// accumulation, so .grad carries a sum into the synced backward), a noSync() backward added in
// on the third step, and the gradient norm clipped — the parameters equal bit for bit.
std::vector<std::vector<at::Tensor>> trainWithViews(bool views) {
  const Data data = makeData(128);
  std::vector<std::vector<at::Tensor>> result(2);
  // Made here: torch's generator is global, and two threads seeding it would race.
  const std::vector<std::shared_ptr<Net>> nets{makeNet(0), makeNet(7)};
  testing::runRanks(
      2,
      [&](std::shared_ptr<Communicator> comm, int rank) {
        const auto& net = nets[static_cast<size_t>(rank)];
        torch::optim::Adam opt(net->parameters(), 1e-2);
        AcceleratorOptions o = options(comm, rank, /*accumulation=*/2);
        o.gradient_as_bucket_view = views;
        Accelerator acc(o);
        acc.prepare(*net, opt);
        for (int64_t s = 0; s < 6; ++s) {
          for (int64_t micro = 0; micro < 2; ++micro) {
            const int64_t at = ((s * 2 + micro) * 2 + rank) * 4;
            const auto loss = [&] {
              return torch::mse_loss(net->forward(data.x.narrow(0, at, 4)),
                                     data.y.narrow(0, at, 4));
            };
            acc.accumulate();
            if (s == 2 && micro == 1) {
              NoSyncGuard guard(acc);
              acc.backward(loss() * 0.5);
            }
            acc.backward(loss());
            if (acc.syncGradients()) acc.clipGradNorm(0.05);
            acc.step();
          }
        }
        for (auto& p : net->parameters())
          result[static_cast<size_t>(rank)].push_back(p.detach().clone());
      },
      std::chrono::seconds(30), CpuBackend::SharedMemory);
  return result;
}

TEST(GradientSyncTest, BucketViewsTrainBitForBitAsTheCopyingPath) {
  const auto views = trainWithViews(true), copies = trainWithViews(false);
  for (size_t r = 0; r < 2; ++r) {
    for (size_t i = 0; i < views[r].size(); ++i) {
      EXPECT_TRUE(torch::equal(views[r][i], copies[r][i]))
          << "rank " << r << ", parameter " << i << ": differs by "
          << (views[r][i] - copies[r][i]).abs().max().item<float>();
    }
  }
  EXPECT_TRUE(torch::equal(views[0][0], views[1][0])) << "the ranks drifted apart";
}

// From construction on, .grad is the bucket's view, and stays the same memory through backward,
// the sync and step() (zeroed there, not released): no gradient tensor beside the buckets. A
// .grad the user released is stored by autograd on its own, then copied in and made the view
// again.
TEST(GradientSyncTest, GradientsAreBucketViewsFromTheStartAndStayThere) {
  NetWithLoss t;
  auto& [net, params, loss, local, comm] = t;
  sync::GradientSync gs(comm, params, {}, sync::GradientSyncOptions{});
  ASSERT_TRUE(gs.gradientsAreBucketViews());
  std::vector<void*> where;
  for (auto& p : params) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(p.grad().is_alias_of(params[0].grad()));
    EXPECT_EQ(p.grad().count_nonzero().item<int64_t>(), 0);
    where.push_back(p.grad().data_ptr());
  }
  // One synced backward: the bucket sent is this backward's gradients halved, and each .grad,
  // the same memory as before, holds the average (×4 by the recording communicator, so 2L).
  const auto syncOnce = [&](size_t sent) {
    loss().backward();
    gs.finish();
    ASSERT_EQ(comm.started.size(), sent);
    EXPECT_TRUE(torch::equal(comm.started.back(), flat(local, {3, 2, 1, 0}) * 0.5));
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].grad().data_ptr(), where[i]) << "parameter " << i;
      EXPECT_TRUE(torch::equal(params[i].grad(), local[i] * 2)) << "parameter " << i;
    }
  };
  syncOnce(1);
  gs.zeroGradients();
  params[1].mutable_grad().reset();  // released, as zero_grad(set_to_none=True) would
  syncOnce(2);
}

// A model may outlive its Accelerator: once the GradientSync is gone, its hooks are too.
// (Both kinds: the hooks after accumulation of bucket views, the copying hooks before it.)
TEST(GradientSyncTest, DestroyingItRemovesTheHooks) {
  for (const bool views : {true, false}) {
    auto net = makeNet();
    std::vector<at::Tensor> params = net->parameters();
    RecordingCommunicator comm;
    {
      sync::GradientSyncOptions o{/*bucket_cap_bytes=*/140, false};
      o.gradient_as_bucket_view = views;
      sync::GradientSync gs(comm, params, {}, o);
    }
    net->forward(torch::ones({4, 8})).sum().backward();
    EXPECT_EQ(comm.started.size(), 0u) << (views ? "views" : "copies");
  }
}

struct TwoBranches : torch::nn::Module {
  TwoBranches(int64_t aOut, int64_t bOut) {
    a = register_module("a", torch::nn::Linear(4, aOut));
    b = register_module("b", torch::nn::Linear(4, bOut));
  }
  torch::nn::Linear a{nullptr}, b{nullptr};
};

// find_unused_parameters with rank-dependent unused parameters: on step s, rank r uses only
// branch a when (r + s) is even, else only b; one bucket per branch. Before buckets started in
// order, rank 0 started a's bucket while rank 1 started b's, and the two were summed together
// (same sizes) or the ranks hung (different sizes). Every rank must get the exact average of
// both ranks' gradients, with zeros for the branch a rank did not use.
class RankDependentUnusedTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(RankDependentUnusedTest, EveryRankGetsTheAverage) {
  const auto [aOut, bOut] = GetParam();
  const size_t cap = static_cast<size_t>(4 * 5 * std::max(aOut, bOut));  // one branch per bucket
  constexpr int kSteps = 2;
  std::vector<std::shared_ptr<TwoBranches>> nets;
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(3);
    nets.push_back(std::make_shared<TwoBranches>(aOut, bOut));
  }
  // [step][rank]: each rank's own gradients, and what finish() wrote back.
  std::vector<std::vector<std::vector<at::Tensor>>> local(kSteps,
                                                          std::vector<std::vector<at::Tensor>>(2)),
      synced = local;
  testing::runRanks(
      2,
      [&](std::shared_ptr<Communicator> comm, int rank) {
        TwoBranches& net = *nets[static_cast<size_t>(rank)];
        std::vector<at::Tensor> params = net.parameters();
        sync::GradientSync gs(*comm, params, {}, sync::GradientSyncOptions{cap, true});
        if (gs.numBuckets() != 2)
          throw Error("expected 2 buckets, got " + std::to_string(gs.numBuckets()));
        for (int s = 0; s < kSteps; ++s) {
          const at::Tensor x = torch::arange(12, torch::kFloat).reshape({3, 4}) * (rank + 1) + s;
          auto loss = [&] { return ((rank + s) % 2 == 0 ? net.a(x) : net.b(x)).pow(2).sum(); };
          gs.setEnabled(false);
          local[s][rank] = localGradients(params, loss);
          gs.setEnabled(true);
          loss().backward();
          gs.finish();
          for (auto& p : params) {
            synced[s][rank].push_back(p.grad().clone());
            p.mutable_grad() = at::Tensor();
          }
        }
      },
      std::chrono::seconds(10));
  for (int s = 0; s < kSteps; ++s) {
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < 4; ++i) {
        const at::Tensor expected = (local[s][0][i] + local[s][1][i]) * 0.5;
        EXPECT_TRUE(torch::equal(synced[s][r][i], expected))
            << "step " << s << ", rank " << r << ", parameter " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Branches, RankDependentUnusedTest,
                         ::testing::Values(std::make_pair<int64_t, int64_t>(4, 4),
                                           std::make_pair<int64_t, int64_t>(4, 6)),
                         [](const auto& info) {
                           return info.param.first == info.param.second ? "SameSizes"
                                                                        : "DifferentSizes";
                         });

// Events of all ranks in one order (a shared, locked log), with the barriers each rank passes.
struct EventLog {
  void add(const std::string& event) {
    std::lock_guard<std::mutex> lock(m);
    events.push_back(event);
  }
  // Position of `event`, or -1.
  ptrdiff_t at(const std::string& event) const {
    auto it = std::find(events.begin(), events.end(), event);
    return it == events.end() ? -1 : it - events.begin();
  }
  std::mutex m;
  std::vector<std::string> events;
};

class LoggingCommunicator : public Communicator {
 public:
  LoggingCommunicator(std::shared_ptr<Communicator> inner, EventLog& log)
      : inner_(std::move(inner)), log_(log) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* backend() const override { return inner_->backend(); }
  std::unique_ptr<Work> allreduceAsync(at::Tensor& t, ReduceOp op) override {
    return inner_->allreduceAsync(t, op);
  }
  void broadcast(at::Tensor& t, int root) override { inner_->broadcast(t, root); }
  std::vector<at::Tensor> allgather(const at::Tensor& t) override { return inner_->allgather(t); }
  void barrier() override {
    log_.add("r" + std::to_string(rank()) + " barrier in");
    inner_->barrier();
    log_.add("r" + std::to_string(rank()) + " barrier out");
  }

 private:
  std::shared_ptr<Communicator> inner_;
  EventLog& log_;
};

// The main process's section ends before any other rank's begins: in the shared order of
// events, and in each rank's own order (main: section, then barrier; others: barrier, then
// section), which holds however the threads happen to be scheduled.
TEST(AcceleratorTest, MainProcessFirstRunsTheMainSectionBeforeTheOthers) {
  constexpr int kWorld = 3;
  EventLog log;
  testing::runRanks(kWorld, [&](std::shared_ptr<Communicator> comm, int rank) {
    Accelerator acc(options(std::make_shared<LoggingCommunicator>(comm, log), rank));
    const std::string me = "r" + std::to_string(rank);
    acc.mainProcessFirst([&] {
      log.add(me + " begin");
      log.add(me + " end");
    });
  });
  const auto mainEnd = log.at("r0 end");
  ASSERT_GE(mainEnd, 0);
  EXPECT_LT(log.at("r0 end"), log.at("r0 barrier in"))
      << "the main process waited before its section";
  for (int r = 1; r < kWorld; ++r) {
    const std::string me = "r" + std::to_string(r);
    EXPECT_GT(log.at(me + " begin"), mainEnd)
        << me << " began before the main process's section ended";
    EXPECT_GE(log.at(me + " barrier out"), 0) << me << " did not wait for the main process";
    EXPECT_LT(log.at(me + " barrier out"), log.at(me + " begin"))
        << me << " did not wait before its section";
  }
  EXPECT_EQ(log.events.size(), static_cast<size_t>(kWorld * 4))
      << "each rank: one section, one barrier";
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
  for (size_t r = 0; r < 2; ++r)
    expectClose(resumed[r], uninterrupted[r], ("rank " + std::to_string(r)).c_str());
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

// Gradients of two dtypes, one of them undefined: every defined one unscaled (LibTorch 2.3+ takes
// the fused kernel on the CPU too, one per dtype; older ones a pass per gradient), the flag
// raised by a NaN in either group.
TEST(GradScalerTest, UnscalesEveryDtypeGroupAndFindsAnInfInAny) {
  GradScalerOptions o;
  o.init_scale = 4.0;
  GradScaler scaler(o);
  auto comm = makeSingleProcessCommunicator();
  at::Tensor f32 = torch::full({3}, 8.0f), f64 = torch::full({2}, 2.0, torch::kDouble), none;
  EXPECT_FALSE(scaler.unscale({f32, none, f64}, *comm));
  EXPECT_TRUE(torch::equal(f32, torch::full({3}, 2.0f)));
  EXPECT_TRUE(torch::equal(f64, torch::full({2}, 0.5, torch::kDouble)));
  f64[1] = std::nan("");
  EXPECT_TRUE(scaler.unscale({f32, f64}, *comm));
  EXPECT_TRUE(torch::equal(f32, torch::full({3}, 0.5f)));  // unscaled all the same
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
