// The NCCL communicator's decisions (comm/collective_engine.h), run on the CPU against a fake
// DeviceQueue that logs every device call and plays a peer: the order of events and waits, no
// host wait in a training step, the event pool, the watchdog's abort rule, non-blocking NCCL's
// in-progress polling, the tensors NCCL refuses; and the device choice and checkpoint RNG files
// that a GPU run depends on. What only a GPU can prove is in the README ("What needs a GPU").

#include "libaccel/comm/collective_engine.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

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
};

class FakeQueue : public DeviceQueue {
 public:
  explicit FakeQueue(FakeDevice& d) : d_(d) {}
  void recordOnCaller(int e) override { d_.log.push_back("record caller " + std::to_string(e)); }
  void queueWaits(int e) override { d_.log.push_back("queue waits " + std::to_string(e)); }
  QueueState launch(const Collective& c) override {
    d_.log.push_back(std::string("launch ") + name(c.kind) + " " + std::to_string(c.count));
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
              "NCCL all-reduce of 8 Float elements did not complete within 2000 ms (a peer did "
              "not start, or cannot be reached); aborted");
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
  at::Tensor flags = torch::ones({2}, torch::kBool);
  try {
    cpu->allreduceAsync(flags, ReduceOp::Max);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "NCCL all-reduce: NCCL has no Bool type");
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
  f.local_world_size = 3;
  f.visible_list = "4,5";
  try {
    chooseDevice(f);
    FAIL() << "three ranks were put on two GPUs";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "3 ranks run on this machine (LOCAL_WORLD_SIZE=3, LOCAL_RANK=1) but only 2 CUDA "
              "devices are visible (CUDA_VISIBLE_DEVICES=4,5); each rank needs its own GPU: start "
              "at most 2 processes per machine (--num_processes), or train on the CPU (--cpu)");
  }
  f.cpu_asked = true;
  EXPECT_NO_THROW(chooseDevice(f));
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

}  // namespace
}  // namespace accel::comm
