#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include "accel/accelerator.h"
#include "libaccel/comm/from_environment.h"
#include "libaccel/comm/shm_group.h"
#include "tests/libaccel/world.h"

namespace accel {
namespace {

// (world size, backend)
class CollectivesTest : public ::testing::TestWithParam<std::tuple<int, CpuBackend>> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  void runRanks(const std::function<void(std::shared_ptr<Communicator>, int)>& body) {
    testing::runRanks(world(), body, std::chrono::seconds(30), std::get<1>(GetParam()));
  }
};

TEST_P(CollectivesTest, CommunicatorPrimitives) {
  const int n = world();
  runRanks([n](std::shared_ptr<Communicator> comm, int rank) {
    auto t = torch::full({3}, static_cast<float>(rank + 1));
    comm->allreduce(t, ReduceOp::Sum);
    EXPECT_TRUE(torch::allclose(t, torch::full({3}, n * (n + 1) / 2.0f)));
    auto m = torch::full({1}, static_cast<float>(rank));
    comm->allreduce(m, ReduceOp::Max);
    EXPECT_EQ(m.item<float>(), n - 1);
    auto b = torch::full({2}, rank == n - 1 ? 42.0f : 0.0f);
    comm->broadcast(b, n - 1);
    EXPECT_EQ(b[1].item<float>(), 42.0f);
    auto all = comm->allgather(torch::full({1}, static_cast<float>(rank * 10)));
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r)].item<float>(), r * 10.0f);
    comm->barrier();
  });
}

TEST_P(CollectivesTest, AcceleratorHelpers) {
  const int n = world();
  runRanks([n](std::shared_ptr<Communicator> comm, int rank) {
    Accelerator acc(testing::optionsFor(comm, rank));
    EXPECT_EQ(acc.numProcesses(), n);
    EXPECT_EQ(acc.isMainProcess(), rank == 0);
    auto g = acc.gather(torch::tensor({rank, rank}, torch::kLong));
    ASSERT_EQ(g.size(0), 2 * n);
    EXPECT_EQ(g[2 * n - 1].item<int64_t>(), n - 1);
    EXPECT_EQ(acc.gather(torch::tensor(rank)).size(0), n);  // scalars become one row each
    auto sum = acc.reduce(torch::full({2}, 1.0 + rank));
    EXPECT_DOUBLE_EQ(sum[0].item<double>(), n + n * (n - 1) / 2.0);
    auto mean = acc.reduce(torch::full({1}, 1.0 + rank), Reduction::Mean);
    EXPECT_DOUBLE_EQ(mean.item<double>(), (n + 1) / 2.0);
    auto x = torch::full({1}, static_cast<double>(rank));
    acc.broadcast(x, 1);
    EXPECT_EQ(x.item<double>(), 1.0);
    // Rank r has r+1 rows; padded to n rows with -1, at the end or the start.
    auto rows = torch::full({rank + 1, 2}, static_cast<float>(rank));
    auto padded = acc.padAcrossProcesses(rows, 0, -1);
    ASSERT_EQ(padded.size(0), n);
    EXPECT_EQ(padded[0][0].item<float>(), rank);
    if (rank + 1 < n) {
      EXPECT_EQ(padded[n - 1][1].item<float>(), -1.0f);
    }
    auto first = acc.padAcrossProcesses(rows, 0, -1, /*padFirst=*/true);
    EXPECT_EQ(first[n - 1][0].item<float>(), rank);
    auto [begin, end] = acc.splitBetweenProcesses(10);
    EXPECT_EQ(end - begin, 10 / n + (static_cast<size_t>(rank) < 10 % n ? 1 : 0));
    std::vector<int> order;
    acc.mainProcessFirst([&] { order.push_back(rank); });
    acc.waitForEveryone();
  });
}

TEST_P(CollectivesTest, GatherForMetricsCountsEverySampleOnce) {
  const int n = world();
  runRanks([n](std::shared_ptr<Communicator> comm, int rank) {
    Accelerator acc(testing::optionsFor(comm, rank));
    ShardOptions o;
    o.dataset_size = 23;  // not a multiple of batch × ranks: the last step wraps around
    o.batch_size = 4;
    ShardedBatchSampler sampler(o, rank, n);
    auto batches = sampler.batches();
    std::vector<int64_t> seen;
    for (size_t i = 0; i < batches.size(); ++i) {
      std::vector<int64_t> ids(batches[i].begin(), batches[i].end());
      auto g = acc.gatherForMetrics(torch::tensor(ids), sampler, i + 1 == batches.size());
      for (int64_t j = 0; j < g.size(0); ++j) seen.push_back(g[j].item<int64_t>());
    }
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(seen.size(), 23u) << "world " << n;
    for (int64_t j = 0; j < 23; ++j) EXPECT_EQ(seen[static_cast<size_t>(j)], j);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesTest,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::ValuesIn(testing::cpuBackends())),
                         [](const auto& info) {
                           return testing::backendName(std::get<1>(info.param)) +
                                  std::to_string(std::get<0>(info.param));
                         });

// A job that makes a second communicator on the same store after the first is gone (a second
// Accelerator, a benchmark of one backend after another): each finds its own rendezvous, so the
// second shared-memory communicator's ranks do not open the first one's segment, removed by then
// ("cannot open the shared-memory segment ...: No such file or directory").
TEST(CommunicatorsInTurn, EachOnTheSameStoreMeetsItsOwnPeers) {
  for (CpuBackend backend : testing::cpuBackends()) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<std::thread> ranks;
    std::vector<float> sums(2 * 3, 0);
    for (int rank = 0; rank < 2; ++rank) {
      ranks.emplace_back([&, rank] {
        try {
          for (int turn = 0; turn < 3; ++turn) {
            auto comm =
                testing::makeCommunicator(backend, store, rank, 2, std::chrono::seconds(20));
            at::Tensor t = at::full({4}, static_cast<float>(rank + 1 + turn));
            comm->allreduce(t);
            sums[static_cast<size_t>(rank * 3 + turn)] = t[0].item<float>();
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << testing::backendName(backend) << " rank " << rank << ": " << e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int rank = 0; rank < 2; ++rank) {
      for (int turn = 0; turn < 3; ++turn)
        EXPECT_EQ(sums[static_cast<size_t>(rank * 3 + turn)], 3.0f + 2 * turn)
            << testing::backendName(backend) << " rank " << rank << " turn " << turn;
    }
  }
}

// Runs body(comm, rank, async) on 2 shared-memory ranks as threads, once with the all-reduce on
// the communicator's thread and once on the caller's; an exception fails the test, naming both.
void onTwoShmRanks(const std::function<void(Communicator&, int, bool)>& body) {
  for (bool async : {true, false}) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks.emplace_back([&, rank] {
        try {
          comm::ShmOptions o;
          o.timeout = std::chrono::seconds(20);
          o.tag = "libaccel-test";
          o.async = async;
          auto comm = comm::makeShmCommunicator(store, rank, 2, o);
          body(*comm, rank, async);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "async " << async << " rank " << rank << ": " << e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
  }
}

// Shared memory's allreduceAsync on its thread (a CPU to spare) and on the caller's (one CPU
// per rank or fewer, as on a 2-core machine with 2 ranks): three in flight, waited for in order,
// give the same sums; on the caller's thread the result is there when the call returns, and a
// failure (here: the peer never comes) is thrown by wait(), not by the call.
TEST(ShmAsyncTest, OnItsThreadAndOnTheCallersTheWorkIsTheSame) {
  onTwoShmRanks([](Communicator& comm, int rank, bool async) {
    std::vector<at::Tensor> ts;
    std::vector<std::unique_ptr<Work>> works;
    for (int k = 0; k < 3; ++k) {
      ts.push_back(at::full({20000}, static_cast<float>(rank + 1 + 10 * k)));
      works.push_back(comm.allreduceAsync(ts.back(), ReduceOp::Sum));
      if (!async) {
        EXPECT_EQ(ts.back()[19999].item<float>(), 3.0f + 20 * k);
      }
    }
    for (int k = 0; k < 3; ++k) {
      works[static_cast<size_t>(k)]->wait();
      EXPECT_TRUE(torch::equal(ts[static_cast<size_t>(k)], at::full({20000}, 3.0f + 20 * k)))
          << "async " << async << " rank " << rank << " all-reduce " << k;
    }
  });
}

// Shared memory's bf16 wire, converted on the way in and out, gives the bits of the general path
// (round into a bf16 copy, all-reduce it, widen it back) on 2 ranks, small and split sizes, on
// its thread and on the caller's; float64 takes the general path, with the bf16 copy that float32
// does not need. So does its average, divided on the way (against mul_, then the all-reduce), with
// bf16 on the wire and without.
TEST(ShmAsyncTest, TheBf16WireAndTheMeanEqualTheirGeneralPaths) {
  onTwoShmRanks([](Communicator& comm, int rank, bool async) {
    for (int64_t n : {int64_t{100}, int64_t{300000}}) {
      at::manual_seed(rank + 1);
      const at::Tensor x = at::randn({n}) * 1000;
      at::Tensor fused = x.clone(), general = x.clone(), wide = x.to(at::kDouble);
      at::Tensor wire = at::empty({n}, at::kBFloat16), none;
      EXPECT_FALSE(comm.needsBf16Wire(fused));
      EXPECT_TRUE(comm.needsBf16Wire(wide));
      comm.allreduceBf16WireAsync(fused, none, false)->wait();
      comm.Communicator::allreduceBf16WireAsync(general, wire, false)->wait();
      EXPECT_TRUE(torch::equal(fused, general)) << "async " << async << " n " << n;
      comm.allreduceBf16WireAsync(wide, wire, false)->wait();
      EXPECT_TRUE(torch::equal(wide.to(at::kFloat), general)) << "float64, n " << n;
      // Its average: divided on the way, the bits of mul_, then the bf16 copy's all-reduce.
      at::Tensor fusedMean = x.clone(), generalMean = x.clone();
      comm.allreduceBf16WireAsync(fusedMean, none, true)->wait();
      comm.Communicator::allreduceBf16WireAsync(generalMean, wire, true)->wait();
      EXPECT_TRUE(torch::equal(fusedMean, generalMean)) << "bf16 mean, n " << n;
      EXPECT_FALSE(torch::equal(fusedMean, fused)) << "not divided";
      // The average: scaled on the way, the bits of mul_ then the all-reduce.
      at::Tensor mean = x.clone(), divided = x.clone();
      comm.allreduceMeanAsync(mean)->wait();
      comm.Communicator::allreduceMeanAsync(divided)->wait();
      EXPECT_TRUE(torch::equal(mean, divided)) << "mean, async " << async << " n " << n;
    }
  });
}

TEST(ShmAsyncTest, OnTheCallersThreadAFailureIsThrownByWait) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::atomic<bool> done{false};
  std::thread peer([&] {  // attaches, then never joins the all-reduce
    comm::ShmOptions o;
    o.tag = "libaccel-test";
    auto comm = comm::makeShmCommunicator(store, 1, 2, o);
    while (!done) std::this_thread::yield();
  });
  comm::ShmOptions o;
  o.timeout = std::chrono::milliseconds(300);
  o.tag = "libaccel-test";
  o.async = false;
  auto comm = comm::makeShmCommunicator(store, 0, 2, o);
  at::Tensor t = at::ones({8});
  std::unique_ptr<Work> work;
  ASSERT_NO_THROW(work = comm->allreduceAsync(t, ReduceOp::Sum));
  try {
    work->wait();
    ADD_FAILURE() << "wait() did not throw";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for rank 1"), std::string::npos) << e.what();
  }
  done = true;
  peer.join();
}

TEST(SingleProcessTest, NoLauncherNoNetworking) {
  unsetenv("WORLD_SIZE");
  Accelerator acc;
  EXPECT_EQ(acc.numProcesses(), 1);
  EXPECT_TRUE(acc.isMainProcess());
  auto g = acc.gather(torch::ones({2}));
  EXPECT_EQ(g.size(0), 2);
  acc.waitForEveryone();
}

TEST(SingleProcessTest, Fp16WithoutCudaIsAnError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is visible";
  AcceleratorOptions o;
  o.mixed_precision = MixedPrecision::Fp16;
  try {
    Accelerator acc(o);
    FAIL() << "fp16 accepted without CUDA";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "mixed precision fp16 needs a CUDA device and this process trains on the CPU (no CUDA "
        "device is visible to this LibTorch); use bf16 or no");
  }
}

TEST(SingleProcessTest, MixedPrecisionFromEnvironment) {
  setenv("ACCELERATE_MIXED_PRECISION", "bf16", 1);
  setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4", 1);
  Accelerator acc;
  EXPECT_EQ(acc.mixedPrecision(), MixedPrecision::Bf16);
  EXPECT_EQ(acc.gradientAccumulationSteps(), 4);
  {
    // On the accelerator's device: the CPU here, cuda:0 where a GPU is visible.
    auto cast = acc.autocast();
    auto y = torch::mm(acc.toDevice(torch::ones({2, 2})), acc.toDevice(torch::ones({2, 2})));
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(
      torch::mm(acc.toDevice(torch::ones({2, 2})), acc.toDevice(torch::ones({2, 2}))).scalar_type(),
      torch::kFloat);
  setenv("ACCELERATE_MIXED_PRECISION", "fp32", 1);
  EXPECT_THROW(Accelerator bad, Error);
  unsetenv("ACCELERATE_MIXED_PRECISION");
  unsetenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS");
}

TEST(SharedMemoryTest, StoresFromEnvironment) {
  unsetenv("ACCEL_SHM_STORES");
  EXPECT_EQ(comm::shmStoresFromEnvironment(), shm::Stores::Auto);
  setenv("ACCEL_SHM_STORES", "plain", 1);
  EXPECT_EQ(comm::shmStoresFromEnvironment(), shm::Stores::Plain);
  setenv("ACCEL_SHM_STORES", "streaming", 1);
  EXPECT_EQ(comm::shmStoresFromEnvironment(), shm::Stores::Streaming);
  setenv("ACCEL_SHM_STORES", "nt", 1);
  try {
    comm::shmStoresFromEnvironment();
    ADD_FAILURE() << "nt accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "ACCEL_SHM_STORES='nt' is not one of auto, plain, streaming");
  }
  unsetenv("ACCEL_SHM_STORES");
}

}  // namespace
}  // namespace accel
