// The NCCL communicator's decisions (comm/collective_engine.h), run on the CPU against a fake
// DeviceQueue that logs every device call and plays a peer: the order of events and waits, no
// host wait in a training step, the event pool, the watchdog's abort rule, non-blocking NCCL's
// in-progress polling, the tensors NCCL refuses; and the device choice and checkpoint RNG files
// that a GPU run depends on. What only a GPU can prove is in the README ("What needs a GPU").

#include "libaccel/comm/collective_engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "accel/accelerator.h"
#include "accel/error.h"
#include "libaccel/checkpoint/state_files.h"
#include "libaccel/comm/device_choice.h"
#include "libaccel/sync/gradient_sync.h"

namespace accel::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What the fake shares with its test: the log, the clock, and the device's progress.
struct FakeDevice {
  std::vector<std::string> log;
  Clock::time_point now{};
  bool complete = true;               // whether recorded events count as done
  int in_progress_polls = 0;          // launch() and state() report ncclInProgress this many times
  std::string async_error;            // state() reports it as a failure
  milliseconds advance_per_query{0};  // done() moves the clock (a host that waits)
  int peers = 2;                      // all-reduce sums as if every rank held the same data
  std::string cuda_error;             // done() throws it, as CudaQueue does on a CUDA error
  bool unloading = false;             // done() throws QueueUnloading (the program is exiting)
  std::vector<Collective> launched;   // what NCCL was asked for, in order
};

class FakeQueue : public DeviceQueue {
 public:
  explicit FakeQueue(FakeDevice& d) : d_(d) {}
  void recordOnCaller(int e) override { d_.log.push_back("record caller " + std::to_string(e)); }
  void queueWaits(int e) override { d_.log.push_back("queue waits " + std::to_string(e)); }
  QueueState launch(const Collective& c) override {
    d_.log.push_back(std::string("launch ") + name(c.kind) + " " + std::to_string(c.count));
    d_.launched.push_back(c);
    perform(c);
    if (d_.in_progress_polls > 0) {
      --d_.in_progress_polls;
      return {QueueState::InProgress, ""};
    }
    return {};
  }
  void recordOnQueue(int e) override { d_.log.push_back("record queue " + std::to_string(e)); }
  void callerWaits(int e) override { d_.log.push_back("caller waits " + std::to_string(e)); }
  bool done(int e) override {
    d_.log.push_back("done? " + std::to_string(e));
    if (!d_.cuda_error.empty()) throw Error(d_.cuda_error);
    if (d_.unloading) throw QueueUnloading("the CUDA runtime is unloading");
    d_.now += d_.advance_per_query;
    return d_.complete;
  }
  void keepUntilDone(const at::Tensor&) override {}
  QueueState state() override {
    if (!d_.async_error.empty()) return {QueueState::Failed, d_.async_error};
    if (d_.in_progress_polls > 0) {
      --d_.in_progress_polls;
      d_.now += milliseconds(400);
      return {QueueState::InProgress, ""};
    }
    return {};
  }
  void abort() override { d_.log.push_back("abort"); }

 private:
  static const char* name(CollectiveKind k) {
    return k == CollectiveKind::AllReduce   ? "all-reduce"
           : k == CollectiveKind::Broadcast ? "broadcast"
                                            : "all-gather";
  }
  // The peers hold what this rank holds: a sum is `peers` times it, a gather `peers` copies.
  void perform(const Collective& c) {
    const auto n = static_cast<int64_t>(c.count);
    auto opts = at::TensorOptions(c.dtype);
    if (c.kind == CollectiveKind::AllReduce && c.op == ReduceOp::Sum) {
      at::from_blob(c.recv, {n}, opts).mul_(d_.peers);
    } else if (c.kind == CollectiveKind::AllGather) {
      at::Tensor in = at::from_blob(const_cast<void*>(c.send), {n}, opts);
      for (int r = 0; r < d_.peers; ++r)
        at::from_blob(c.recv, {d_.peers * n}, opts).narrow(0, r * n, n).copy_(in);
    }
  }
  FakeDevice& d_;
};

EngineOptions testOptions(FakeDevice& d, milliseconds timeout = milliseconds(2000)) {
  EngineOptions o;
  o.timeout = timeout;
  o.watchdog_thread = false;
  o.now = [&d] { return d.now; };
  return o;
}

std::vector<std::string> without(const std::vector<std::string>& log, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& line : log)
    if (line.rfind(prefix, 0) != 0) out.push_back(line);
  return out;
}

TEST(CollectiveEngineTest, AnAllReduceIsOrderedAfterTheCallerAndTheCallerAfterIt) {
  FakeDevice d;
  auto comm = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  at::Tensor t = torch::ones({4});
  auto work = comm->allreduceAsync(t, ReduceOp::Sum);
  EXPECT_EQ(d.log, (std::vector<std::string>{"record caller 0", "queue waits 0",
                                             "launch all-reduce 4", "record queue 1"}));
  work->wait();
  EXPECT_EQ(d.log.back(), "caller waits 1");  // the stream waits; the host never asked done?
  EXPECT_EQ(d.log.size(), 5u);
  EXPECT_TRUE(torch::equal(t, torch::full({4}, 2.0f)));
}

TEST(CollectiveEngineTest, BroadcastAndAllGatherOrderTheCallerWithoutAHostWait) {
  FakeDevice d;
  auto comm = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 1, 2, testOptions(d));
  at::Tensor b = torch::arange(3, torch::kLong);
  comm->broadcast(b, 0);
  auto parts = comm->allgather(torch::tensor({5, 6}, torch::kInt));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1][1].item<int>(), 6);
  EXPECT_EQ(d.log, (std::vector<std::string>{
                       "record caller 0", "queue waits 0", "launch broadcast 3", "record queue 1",
                       "caller waits 1", "record caller 0", "queue waits 0", "launch all-gather 2",
                       "record queue 2", "caller waits 2"}));
}

TEST(CollectiveEngineTest, BarrierWaitsOnTheHostUntilTheDeviceIsDone) {
  FakeDevice d;
  d.complete = false;
  int clockReads = 0;
  EngineOptions o = testOptions(d);
  o.now = [&] {
    if (++clockReads == 6) d.complete = true;  // the device finishes while the host waits
    return d.now;
  };
  auto comm = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, o);
  comm->barrier();
  EXPECT_TRUE(d.complete);
  EXPECT_EQ(d.log[2], "launch all-reduce 1");
  EXPECT_EQ(d.log.back(), "done? 1");
}

Collective allReduceOf(at::Tensor& t) {
  return {CollectiveKind::AllReduce, t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
          t.scalar_type()};
}

TEST(CollectiveEngineTest, EventsAreReusedStepAfterStep) {
  FakeDevice d;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({8});
  for (int step = 0; step < 10; ++step) {
    std::vector<uint64_t> seqs;
    for (int bucket = 0; bucket < 3; ++bucket)
      seqs.push_back(engine.start("all-reduce", allReduceOf(t), {t}));
    for (uint64_t s : seqs) engine.orderCaller(s);
    engine.check(d.now);  // the watchdog's pass retires them
    EXPECT_EQ(engine.inFlight(), 0u);
  }
  EXPECT_EQ(engine.eventsCreated(), 4u);  // the caller's event and one per bucket in flight
}

TEST(CollectiveEngineTest, WaitingForACompletedCollectiveQueuesNothing) {
  FakeDevice d;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({2});
  const uint64_t seq = engine.start("all-reduce", allReduceOf(t), {t});
  engine.check(d.now);
  const size_t before = d.log.size();
  engine.orderCaller(seq);
  EXPECT_EQ(d.log.size(), before);
}

const char* kStuck =
    "NCCL all-reduce of 1000 Float elements did not complete within 2000 ms (a peer died or "
    "stopped calling collectives); the communicator was aborted";

TEST(CollectiveEngineTest, TheWatchdogAbortsACollectiveStuckPastTheTimeout) {
  FakeDevice d;
  d.complete = false;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({1000});
  const Clock::time_point started = d.now;
  const uint64_t seq = engine.start("all-reduce", allReduceOf(t), {t});
  engine.check(started + milliseconds(2000));  // the timeout itself is not past it
  EXPECT_EQ(engine.abortReason(), "");
  engine.check(started + milliseconds(2001));
  EXPECT_EQ(engine.abortReason(), kStuck);
  EXPECT_EQ(std::count(d.log.begin(), d.log.end(), "abort"), 1);
  try {
    engine.orderCaller(seq);
    FAIL() << "a wait on an aborted communicator returned";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), kStuck);
  }
  EXPECT_THROW(engine.start("all-reduce", allReduceOf(t), {t}), Error);
  engine.check(started + milliseconds(9000));
  EXPECT_EQ(std::count(d.log.begin(), d.log.end(), "abort"), 1);  // aborted once
}

TEST(CollectiveEngineTest, ASlowCollectiveThatCompletedIsNotAborted) {
  FakeDevice d;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({1000});
  engine.start("all-reduce", allReduceOf(t), {t});
  engine.check(d.now + milliseconds(60000));  // looked at late, but it is done
  EXPECT_EQ(engine.abortReason(), "");
  EXPECT_EQ(engine.inFlight(), 0u);
}

TEST(CollectiveEngineTest, SynchronizeThrowsTheWatchdogsErrorInsteadOfHanging) {
  FakeDevice d;
  d.complete = false;
  d.advance_per_query = milliseconds(500);  // each look at the device takes half a second
  auto comm = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  at::Tensor t = torch::ones({1000});
  auto work = comm->allreduceAsync(t, ReduceOp::Sum);
  try {
    comm->synchronize();
    FAIL() << "synchronize returned on a stuck collective";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), kStuck);
  }
  EXPECT_THROW(work->wait(), Error);
  EXPECT_THROW(comm->barrier(), Error);
}

// The watchdog's own thread, on the real clock: synchronize() ends with its abort.
TEST(CollectiveEngineTest, TheWatchdogThreadAbortsWhileTheHostWaits) {
  FakeDevice d;
  d.complete = false;
  EngineOptions o;
  o.timeout = milliseconds(100);
  o.poll_interval = milliseconds(10);
  auto comm = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, o);
  at::Tensor t = torch::ones({3});
  comm->allreduceAsync(t, ReduceOp::Sum);
  try {
    comm->synchronize();
    FAIL() << "synchronize returned on a stuck collective";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "NCCL all-reduce of 3 Float elements did not complete within 100 ms (a peer died or "
              "stopped calling collectives); the communicator was aborted");
  }
}

TEST(CollectiveEngineTest, APeersFailureReportedByNcclAbortsNamingTheCollective) {
  FakeDevice d;
  d.complete = false;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({8}, torch::kHalf);
  engine.start("all-reduce", allReduceOf(t), {t});
  engine.check(d.now);
  EXPECT_EQ(engine.abortReason(), "");
  d.async_error = "remote process exited or there was a network error";
  engine.check(d.now);
  EXPECT_EQ(engine.abortReason(),
            "NCCL reported an error while the all-reduce of 8 Half elements was in flight: "
            "remote process exited or there was a network error (a peer failed?); the "
            "communicator was aborted");
  EXPECT_EQ(d.log.back(), "abort");
}

// On the watchdog's thread an exception would end the process: a CUDA error aborts instead.
TEST(CollectiveEngineTest, ACudaErrorWhileWatchingAbortsInsteadOfEscaping) {
  FakeDevice d;
  d.complete = false;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({8});
  const uint64_t seq = engine.start("all-reduce", allReduceOf(t), {t});
  d.cuda_error = "CUDA: query a collective's event: an illegal memory access was encountered";
  EXPECT_NO_THROW(engine.check(d.now));
  EXPECT_EQ(engine.abortReason(),
            "checking the collectives in flight failed: CUDA: query a collective's event: an "
            "illegal memory access was encountered; the communicator was aborted");
  EXPECT_THROW(engine.orderCaller(seq), Error);
}

TEST(CollectiveEngineTest, ACallNcclHasNotTakenYetIsPolledUntilReady) {
  FakeDevice d;
  d.in_progress_polls = 3;  // launch, then two polls of the communicator's state
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({8});
  engine.start("all-reduce", allReduceOf(t), {t});
  EXPECT_EQ(d.in_progress_polls, 0);
  EXPECT_EQ(engine.abortReason(), "");
  EXPECT_EQ(d.log.back(), "record queue 1");
}

TEST(CollectiveEngineTest, ACallStillInProgressAfterTheTimeoutAborts) {
  FakeDevice d;
  d.in_progress_polls = 1000;  // each poll moves the clock 400 ms
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({8});
  try {
    engine.start("all-reduce", allReduceOf(t), {t});
    FAIL() << "a call NCCL never took returned";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "NCCL all-reduce of 8 Float elements was not taken within 2000 ms (a peer did not "
              "start, or cannot be reached); the communicator was aborted");
  }
  EXPECT_EQ(d.log.back(), "abort");
  EXPECT_NE(engine.abortReason(), "");
}

TEST(CollectiveEngineTest, JoiningIsPolledAndAbortedOnFailureOrTimeout) {
  FakeDevice d;
  const EngineOptions o = testOptions(d);
  int polls = 0, aborts = 0;
  auto abort = [&] { ++aborts; };
  CollectiveEngine::awaitReady(
      [&] {
        d.now += milliseconds(100);
        return ++polls < 4 ? QueueState{QueueState::InProgress, ""} : QueueState{};
      },
      abort, "joining", o);
  EXPECT_EQ(polls, 4);
  EXPECT_EQ(aborts, 0);
  try {
    CollectiveEngine::awaitReady(
        [] {
          return QueueState{QueueState::Failed, "unhandled system error"};
        },
        abort, "NCCL: rank 1 joining", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "NCCL: rank 1 joining failed: unhandled system error");
  }
  EXPECT_EQ(aborts, 1);
  EXPECT_THROW(CollectiveEngine::awaitReady(
                   [&] {
                     d.now += milliseconds(700);
                     return QueueState{QueueState::InProgress, ""};
                   },
                   abort, "joining", o),
               Error);
  EXPECT_EQ(aborts, 2);
}

TEST(CollectiveEngineTest, TensorsNcclCannotTakeAreClearErrors) {
  FakeDevice d;
  EngineOptions o = testOptions(d);
  o.device = at::Device(at::kCUDA, 0);
  auto gpu = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, o);
  at::Tensor host = torch::ones({4});
  try {
    gpu->allreduceAsync(host, ReduceOp::Sum);
    FAIL() << "a CPU tensor went to NCCL";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "NCCL all-reduce: the tensor is on cpu; this communicator takes tensors on cuda:0 "
              "(move it there first, e.g. with Accelerator::toDevice)");
  }
  EXPECT_TRUE(d.log.empty());  // nothing was queued
  auto cpu = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  at::Tensor strided = torch::ones({4, 4}).t();
  EXPECT_THROW(cpu->broadcast(strided, 0), Error);
  at::Tensor shorts = torch::ones({2}, torch::kShort);
  try {
    cpu->allreduceAsync(shorts, ReduceOp::Max);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "NCCL all-reduce: NCCL has no Short type, and its values cannot be reduced as bytes");
  }
  EXPECT_TRUE(d.log.empty());
}

// GradientSync over the engine: each bucket's all-reduce is queued from autograd's hooks while
// backward still has layers to go, and the step waits on streams only, never on the host.
TEST(CollectiveEngineTest, BucketsAllReduceWhileBackwardGoesOnWithoutAHostWait) {
  FakeDevice d;
  std::shared_ptr<Communicator> comm =
      makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  torch::manual_seed(3);
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::ReLU(),
                              torch::nn::Linear(32, 32), torch::nn::ReLU(),
                              torch::nn::Linear(32, 4));
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  for (auto& item : model->named_parameters()) {
    names.push_back(item.key());
    params.push_back(item.value());
  }
  sync::GradientSyncOptions so;
  so.bucket_cap_bytes = (32 * 32 + 32) * 4;  // three buckets: layer 3 and 2's bias, 2, 1
  sync::GradientSync sync(*comm, params, names, so);
  ASSERT_EQ(sync.numBuckets(), 3u);
  at::Tensor x = torch::randn({8, 16}).requires_grad_();
  x.register_hook([&](at::Tensor g) {
    d.log.push_back("input gradient");  // after the first layer's backward
    return g;
  });
  // This rank's own gradients, from a backward without sync (the fake's peer has the same).
  sync.setEnabled(false);
  model->forward(x).pow(2).sum().backward();
  std::vector<at::Tensor> local;
  for (auto& p : params) local.push_back(p.grad().clone());
  for (auto& p : params) p.mutable_grad().reset();
  sync.setEnabled(true);
  d.log.clear();
  model->forward(x).pow(2).sum().backward();
  d.log.push_back("backward returned");
  sync.finish();
  const auto launches = without(without(d.log, "record"), "queue waits");
  // Buckets 0 and 1 were queued before backward reached the input; bucket 2 (the first layer's
  // weight) as its gradient came; the step then only ordered the stream after each, in order.
  EXPECT_EQ(launches, (std::vector<std::string>{"launch all-reduce 164", "launch all-reduce 1056",
                                                "input gradient", "launch all-reduce 512",
                                                "backward returned", "caller waits 1",
                                                "caller waits 2", "caller waits 3"}));
  for (size_t k = 0; k < params.size(); ++k)
    EXPECT_TRUE(torch::allclose(params[k].grad(), local[k])) << names[k];
}

TEST(DeviceChoiceTest, AccelerateRuleWithTheReasonForTheCpu) {
  DeviceFacts f;
  EXPECT_FALSE(chooseDevice(f).device.is_cuda());
  EXPECT_EQ(chooseDevice(f).why_cpu, "no CUDA device is visible to this LibTorch");
  f.visible_devices = 2;
  f.world_size = 1;
  EXPECT_EQ(chooseDevice(f).device, at::Device(at::kCUDA, 0));  // one process: no NCCL needed
  f.cpu_asked = true;
  EXPECT_EQ(chooseDevice(f).device, at::Device(at::kCPU));
  EXPECT_EQ(chooseDevice(f).why_cpu, "the CPU was asked for (--cpu)");
  f.cpu_asked = false;
  f.world_size = 4;
  f.local_world_size = 2;
  f.local_rank = 1;
  EXPECT_FALSE(chooseDevice(f).device.is_cuda());
  EXPECT_NE(chooseDevice(f).why_cpu.find("built without NCCL"), std::string::npos);
  f.nccl_built = true;
  EXPECT_EQ(chooseDevice(f).device, at::Device(at::kCUDA, 1));
  f.local_world_size = 3;  // every rank sees both GPUs: three ranks cannot have one each
  try {
    chooseDevice(f);
    FAIL() << "three ranks were put on two GPUs";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "3 ranks run on this machine (LOCAL_WORLD_SIZE=3, LOCAL_RANK=1) but only 2 CUDA "
              "devices are visible; each rank needs its own GPU: start at most 2 processes per "
              "machine (--num_processes), or train on the CPU (--cpu)");
  }
  f.cpu_asked = true;
  EXPECT_NO_THROW(chooseDevice(f));
}

// A GPU list per rank (--virtual_local_rank: LOCAL_RANK=0 and its one GPU; a scheduler's GPU per
// task): 8 ranks on the machine, one GPU each, every one on its cuda:0 — not "8 ranks, 1 GPU".
// Only a LOCAL_RANK past the rank's own list is an error.
TEST(DeviceChoiceTest, ARankWithAGpuListOfItsOwnIsNotComparedWithTheMachinesRanks) {
  DeviceFacts f;
  f.nccl_built = true;
  f.world_size = 16;
  f.local_world_size = 8;
  f.local_rank = 0;
  f.visible_devices = 1;
  f.visible_list = "5";
  EXPECT_EQ(chooseDevice(f).device, at::Device(at::kCUDA, 0));
  f.local_rank = 3;  // a list shared by ranks that index it: rank 3 of "4,5" has none
  f.visible_devices = 2;
  f.visible_list = "4,5";
  try {
    chooseDevice(f);
    FAIL() << "LOCAL_RANK 3 was given one of 2 GPUs";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "LOCAL_RANK=3 but only 2 CUDA devices are visible to this rank "
              "(CUDA_VISIBLE_DEVICES=4,5); each rank trains on cuda:LOCAL_RANK among the GPUs it "
              "sees: start fewer processes per machine (--num_processes), give each its own GPU "
              "(--virtual_local_rank), or train on the CPU (--cpu)");
  }
  f.local_rank = 1;
  EXPECT_EQ(chooseDevice(f).device, at::Device(at::kCUDA, 1));
}

TEST(CheckpointRngTest, TheDevicesGeneratorIsSavedAndRestoredOnlyOnCuda) {
  using checkpoint::rngFilesToRead;
  using checkpoint::rngFilesToWrite;
  using V = std::vector<std::string>;
  EXPECT_EQ(rngFilesToWrite(0, false), V{"random_states_0.pt"});
  EXPECT_EQ(rngFilesToWrite(3, true), (V{"random_states_3.pt", "cuda_random_states_3.pt"}));
  EXPECT_EQ(rngFilesToRead(1, 2, true, true), (V{"random_states_1.pt", "cuda_random_states_1.pt"}));
  EXPECT_EQ(rngFilesToRead(1, 2, false, true), V{"random_states_1.pt"});  // saved on the CPU
  EXPECT_EQ(rngFilesToRead(1, 2, true, false), V{"random_states_1.pt"});  // loaded on the CPU
  EXPECT_EQ(rngFilesToRead(2, 2, true, true), V{});  // a rank the saving job did not have
}

// Momentum kept through prepare(): the prepared copy's next step equals the untouched copy's.
TEST(PrepareTest, TheOptimizersStateMovesWithTheModelUnchanged) {
  auto make = [] {
    torch::manual_seed(1);
    return torch::nn::Linear(4, 2);
  };
  torch::nn::Linear prepared = make(), reference = make();
  torch::optim::SGD preparedOpt(prepared->parameters(),
                                torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD referenceOpt(reference->parameters(),
                                 torch::optim::SGDOptions(0.1).momentum(0.9));
  auto step = [](torch::nn::Linear& m, torch::optim::SGD& opt) {
    opt.zero_grad();
    m->forward(torch::ones({3, 4})).pow(2).sum().backward();
    opt.step();
  };
  step(prepared, preparedOpt);
  step(reference, referenceOpt);
  AcceleratorOptions o;
  o.communicator = makeSingleProcessCommunicator();
  o.mixed_precision = MixedPrecision::No;
  Accelerator acc(o);
  acc.prepare(*prepared, preparedOpt);
  step(prepared, preparedOpt);
  step(reference, referenceOpt);
  EXPECT_TRUE(torch::equal(prepared->weight, reference->weight));
  EXPECT_TRUE(torch::equal(prepared->bias, reference->bias));
}

// ---- What a first GPU run would hit (issue 35), proven on fake queues ----

// A queue that notes which thread made each call (thread-safe), for the watchdog's thread.
class ThreadQueue : public DeviceQueue {
 public:
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::pair<std::thread::id, std::string>> calls;
  };
  explicit ThreadQueue(Shared& s) : s_(s) {}
  void bindThread() override { note("bind"); }
  void recordOnCaller(int) override { note("record caller"); }
  void queueWaits(int) override { note("queue waits"); }
  QueueState launch(const Collective&) override { return note("launch"), QueueState{}; }
  void recordOnQueue(int) override { note("record queue"); }
  void callerWaits(int) override { note("caller waits"); }
  bool done(int) override { return note("done?"), true; }
  void keepUntilDone(const at::Tensor&) override {}
  QueueState state() override { return note("state"), QueueState{}; }
  void abort() override { note("abort"); }

 private:
  void note(const char* what) {
    std::lock_guard<std::mutex> lock(s_.m);
    s_.calls.emplace_back(std::this_thread::get_id(), what);
    s_.cv.notify_all();
  }
  Shared& s_;
};

// The watchdog's first call on its thread binds it to the communicator's GPU (a new thread starts
// on device 0); no other thread binds.
TEST(GpuPathTest, TheWatchdogBindsItsThreadToTheDeviceBeforeAnythingElse) {
  ThreadQueue::Shared shared;
  EngineOptions o;
  o.poll_interval = milliseconds(1);
  {
    CollectiveEngine engine(std::make_unique<ThreadQueue>(shared), o);
    at::Tensor t = torch::ones({2});
    engine.start("all-reduce", collectiveOf(CollectiveKind::AllReduce, t, t.data_ptr()), {t});
    std::unique_lock<std::mutex> lock(shared.m);
    ASSERT_TRUE(shared.cv.wait_for(lock, std::chrono::seconds(10), [&] {
      int watchdogStates = 0;
      for (const auto& c : shared.calls)
        watchdogStates += c.first != std::this_thread::get_id() && c.second == "state";
      return watchdogStates >= 2;
    }));
  }
  std::thread::id watchdog;
  std::vector<std::string> watchdogCalls;
  for (const auto& c : shared.calls) {
    if (c.first == std::this_thread::get_id()) {
      EXPECT_NE(c.second, "bind");
      continue;
    }
    if (watchdog == std::thread::id()) watchdog = c.first;
    EXPECT_EQ(c.first, watchdog);
    watchdogCalls.push_back(c.second);
  }
  ASSERT_FALSE(watchdogCalls.empty());
  EXPECT_EQ(watchdogCalls.front(), "bind");
  EXPECT_EQ(std::count(watchdogCalls.begin(), watchdogCalls.end(), "bind"), 1);
}

// A queue whose abort() blocks until the test releases it (ncclCommAbort waits for the device).
class BlockingAbortQueue : public DeviceQueue {
 public:
  struct Shared {
    std::promise<void> entered, release;
    std::atomic<bool> aborting{false};
    std::atomic<int> calls_while_aborting{0};
  };
  explicit BlockingAbortQueue(Shared& s) : s_(s) {}
  void recordOnCaller(int) override { touch(); }
  void queueWaits(int) override { touch(); }
  QueueState launch(const Collective&) override { return touch(), QueueState{}; }
  void recordOnQueue(int) override { touch(); }
  void callerWaits(int) override { touch(); }
  bool done(int) override { return touch(), false; }  // the collective never completes
  void keepUntilDone(const at::Tensor&) override {}
  QueueState state() override { return touch(), QueueState{}; }
  void abort() override {
    s_.aborting = true;
    s_.entered.set_value();
    s_.release.get_future().wait();
  }

 private:
  void touch() {
    if (s_.aborting) ++s_.calls_while_aborting;
  }
  Shared& s_;
};

// The abort runs without the engine's lock: while it is still blocked, synchronize(), start()
// and Work::wait() return at once, throwing the timeout's error, and none reaches the queue.
TEST(GpuPathTest, CallsReturnWhileTheAbortIsStillRunning) {
  BlockingAbortQueue::Shared shared;
  std::atomic<int64_t> nowMs{0};
  EngineOptions o;
  o.timeout = milliseconds(2000);
  o.watchdog_thread = false;
  o.now = [&] { return Clock::time_point(milliseconds(nowMs.load())); };
  auto comm = makeEngineCommunicator(std::make_unique<BlockingAbortQueue>(shared), 0, 2, o);
  auto* engineComm = comm.get();
  at::Tensor t = torch::ones({4});
  auto work = engineComm->allreduceAsync(t, ReduceOp::Sum);
  nowMs = 2500;
  // synchronize() applies the watchdog's rule itself here (no watchdog thread): it aborts.
  std::thread aborter([&] { EXPECT_THROW(engineComm->synchronize(), Error); });
  ASSERT_EQ(shared.entered.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  const std::string why =
      "NCCL all-reduce of 4 Float elements did not complete within 2000 ms (a peer died or "
      "stopped calling collectives); the communicator was aborted";
  const auto before = Clock::now();
  for (int call = 0; call < 3; ++call) {
    try {
      if (call == 0) engineComm->synchronize();
      if (call == 1) engineComm->allreduceAsync(t, ReduceOp::Sum);
      if (call == 2) work->wait();
      FAIL() << "call " << call << " returned on an aborted communicator";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), why) << "call " << call;
    }
  }
  EXPECT_LT(Clock::now() - before, std::chrono::seconds(5));  // nobody waited for the abort
  EXPECT_EQ(shared.calls_while_aborting.load(), 0);
  shared.release.set_value();
  aborter.join();
}

// A launch still in progress when the watchdog aborts (an older collective timed out): the
// watchdog never asks NCCL while the launch is in progress (one call at a time into a
// communicator), the launching thread stops polling at once and throws the abort's reason, and
// nothing asks NCCL after the abort.
TEST(GpuPathTest, AnAbortDuringALaunchInProgressStopsItsPollingAtOnce) {
  struct Shared {
    std::atomic<bool> first_launch{true}, aborted{false};
    std::atomic<int> states{0}, states_after_abort{0}, states_off_thread{0};
    std::thread::id launcher;
  } shared;
  class Queue : public DeviceQueue {
   public:
    explicit Queue(Shared& s) : s_(s) {}
    void recordOnCaller(int) override {}
    void queueWaits(int) override {}
    QueueState launch(const Collective&) override {
      if (s_.first_launch.exchange(false)) return {};
      s_.launcher = std::this_thread::get_id();
      return {QueueState::InProgress, ""};
    }
    void recordOnQueue(int) override {}
    void callerWaits(int) override {}
    bool done(int) override { return false; }
    void keepUntilDone(const at::Tensor&) override {}
    QueueState state() override {
      ++s_.states;
      if (s_.aborted) ++s_.states_after_abort;
      if (std::this_thread::get_id() != s_.launcher) ++s_.states_off_thread;
      return {QueueState::InProgress, ""};
    }
    void abort() override { s_.aborted = true; }

   private:
    Shared& s_;
  };
  std::atomic<int64_t> nowMs{0};
  EngineOptions o;
  o.timeout = milliseconds(2000);
  o.watchdog_thread = false;
  o.now = [&] { return Clock::time_point(milliseconds(nowMs.load())); };
  CollectiveEngine engine(std::make_unique<Queue>(shared), o);
  at::Tensor t = torch::ones({4});
  engine.start("all-reduce", collectiveOf(CollectiveKind::AllReduce, t, t.data_ptr()), {t});
  nowMs = 1000;
  std::string thrown;
  std::thread launching([&] {
    try {
      engine.start("broadcast", collectiveOf(CollectiveKind::Broadcast, t, t.data_ptr()), {t});
    } catch (const Error& e) {
      thrown = e.what();
    }
  });
  while (shared.states.load() < 3) std::this_thread::yield();  // it polls
  nowMs = 2500;  // the first all-reduce is 2.5 s old; the launch's own deadline is at 3 s
  engine.check(Clock::time_point(milliseconds(nowMs.load())));
  launching.join();
  EXPECT_EQ(thrown,
            "NCCL all-reduce of 4 Float elements did not complete within 2000 ms (a peer died or "
            "stopped calling collectives); the communicator was aborted");
  EXPECT_TRUE(shared.aborted.load());
  EXPECT_EQ(shared.states_after_abort.load(), 0);
  EXPECT_EQ(shared.states_off_thread.load(), 0);  // the watchdog's check asked NCCL nothing
}

// The types NCCL has not: moved as bytes, a bool all-reduce as bytes with Sum as Max; the
// results are the caller's types.
TEST(GpuPathTest, EveryDtypeTheOtherCommunicatorsTakeGoesToNcclAsBytesOrAsItsOwnType) {
  FakeDevice d;
  auto comm = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  at::Tensor flags = torch::tensor({true, false, true});
  comm->broadcast(flags, 0);
  at::Tensor shorts = torch::ones({5}, torch::kShort);
  comm->broadcast(shorts, 0);
  at::Tensor complex = torch::ones({2}, torch::kComplexFloat);
  auto parts = comm->allgather(complex);
  comm->allreduceAsync(flags, ReduceOp::Sum)->wait();
  at::Tensor floats = torch::ones({4});
  comm->allreduceAsync(floats, ReduceOp::Sum)->wait();
  ASSERT_EQ(d.launched.size(), 5u);
  auto is = [](const Collective& c, at::ScalarType type, size_t count, ReduceOp op) {
    return c.dtype == type && c.count == count && c.op == op;
  };
  EXPECT_TRUE(is(d.launched[0], at::kByte, 3, ReduceOp::Sum));   // 3 bools: 3 bytes
  EXPECT_TRUE(is(d.launched[1], at::kByte, 10, ReduceOp::Sum));  // 5 int16: 10 bytes
  EXPECT_TRUE(is(d.launched[2], at::kByte, 16, ReduceOp::Sum));  // 2 complex64: 16 bytes
  EXPECT_TRUE(is(d.launched[3], at::kByte, 3, ReduceOp::Max));   // or of bools
  EXPECT_TRUE(is(d.launched[4], at::kFloat, 4, ReduceOp::Sum));  // its own type
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].scalar_type(), at::kComplexFloat);
  EXPECT_TRUE(torch::equal(parts[1], complex));  // the bytes came back as the values
}

// prepare() of a model with a bool buffer on the NCCL path: its broadcast goes as bytes.
TEST(GpuPathTest, PrepareOfAModelWithABoolBufferWorksOnTheEngine) {
  FakeDevice d;
  struct Masked : torch::nn::Module {
    Masked() {
      linear = register_module("linear", torch::nn::Linear(3, 2));
      mask = register_buffer("mask", torch::tensor({true, false}));
    }
    torch::nn::Linear linear{nullptr};
    torch::Tensor mask;
  };
  auto model = std::make_shared<Masked>();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  AcceleratorOptions o;
  o.communicator = makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  o.mixed_precision = MixedPrecision::No;
  Accelerator acc(o);
  EXPECT_NO_THROW(acc.prepare(*model, opt));
  const bool boolAsBytes =
      std::any_of(d.launched.begin(), d.launched.end(), [](const Collective& c) {
        return c.kind == CollectiveKind::Broadcast && c.dtype == at::kByte && c.count == 2;
      });
  EXPECT_TRUE(boolAsBytes);
}

// exit() with an Accelerator alive: the runtime unloading is no failure; the watchdog stops
// watching without aborting, and asks the device nothing more.
TEST(GpuPathTest, TheRuntimeUnloadingStopsTheWatchdogWithoutAnAbort) {
  FakeDevice d;
  CollectiveEngine engine(std::make_unique<FakeQueue>(d), testOptions(d));
  at::Tensor t = torch::ones({4});
  d.complete = false;
  engine.start("all-reduce", allReduceOf(t), {t});
  d.unloading = true;
  engine.check(d.now);
  d.now += milliseconds(5000);  // past the timeout: still no abort
  const size_t calls = d.log.size();
  engine.check(d.now);
  EXPECT_EQ(engine.abortReason(), "");
  EXPECT_EQ(d.log.size(), calls);
  EXPECT_EQ(std::count(d.log.begin(), d.log.end(), "abort"), 0);
}

// fp16 gradients near the top of their range: each rank's part is divided before the sum (as
// DDP's hook), so 2 x 40000 sums to the average 40000, not to inf (65504 is fp16's largest).
TEST(GpuPathTest, Fp16GradientsAreDividedBeforeTheSumAndDoNotOverflow) {
  FakeDevice d;
  std::shared_ptr<Communicator> comm =
      makeEngineCommunicator(std::make_unique<FakeQueue>(d), 0, 2, testOptions(d));
  at::Tensor w = torch::ones({4}, torch::kHalf).requires_grad_();
  sync::GradientSync sync(*comm, {w}, {"w"}, sync::GradientSyncOptions{});
  (w * torch::full({4}, 40000.0, torch::kHalf)).sum().backward();
  sync.finish();
  ASSERT_EQ(d.launched.size(), 1u);
  EXPECT_EQ(d.launched[0].dtype, at::kHalf);
  EXPECT_TRUE(torch::equal(w.grad(), torch::full({4}, 40000.0, torch::kHalf))) << w.grad();
}

// Every communicator reads the unique id under its own key.
TEST(GpuPathTest, EachCommunicatorHasItsOwnUniqueIdKey) {
  const std::string first = nextNcclUniqueIdKey(), second = nextNcclUniqueIdKey();
  EXPECT_NE(first, second);
  EXPECT_EQ(first.rfind("accel/nccl_unique_id/", 0), 0u);
  EXPECT_EQ(std::stoi(second.substr(21)), std::stoi(first.substr(21)) + 1);
}

}  // namespace
}  // namespace accel::comm
