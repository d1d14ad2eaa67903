// The NCCL communicator and the Accelerator on CUDA (built when LibTorch has CUDA and NCCL was
// found). Needs an NVIDIA GPU: each test is skipped, with the reason, where none is usable.
// Ranks are threads, one GPU each (NCCL does not put two ranks on one device): one GPU gives a
// world of one, which still runs every event, stream wait and NCCL call.

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <limits>
#include <thread>

#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include "accel/accelerator.h"
#include "accel/error.h"
#include "libaccel/comm/nccl_communicator.h"

namespace accel::comm {
namespace {

#define NEED_GPU()                                                     \
  do {                                                                 \
    const std::string why = cudaUnavailableReason();                   \
    if (!why.empty()) GTEST_SKIP() << "no usable NVIDIA GPU: " << why; \
  } while (0)

int gpus() {
  int n = 0;
  cudaGetDeviceCount(&n);
  return std::min(n, 4);
}

// Integer-valued, exact in every type NCCL has, different per rank.
at::Tensor integers(int rank, int64_t n, at::ScalarType t) {
  return ((torch::arange(n, torch::kLong) * 7 + rank * 13) % 17 - 8).to(t);
}

TEST(NcclCommunicatorTest, CollectivesOnDeviceMemoryMatchTheCpuReference) {
  NEED_GPU();
  const int world = gpus();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> ranks;
  std::vector<std::string> failures(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto comm = makeNcclCommunicator(store, r, world, r, std::chrono::seconds(60));
        const at::Device dev(at::kCUDA, static_cast<c10::DeviceIndex>(r));
        for (auto t : {at::kFloat, at::kHalf, at::kBFloat16, at::kInt, at::kLong}) {
          for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
            at::Tensor expected = torch::zeros({n}, torch::kLong);
            for (int q = 0; q < world; ++q) expected += integers(q, n, at::kLong);
            at::Tensor x = integers(r, n, t).to(dev);
            comm->allreduceAsync(x, ReduceOp::Sum)->wait();
            if (!torch::equal(x.cpu().to(at::kLong), expected))
              throw Error("all-reduce of " + std::to_string(n) + " " + c10::toString(t));
          }
        }
        at::Tensor b = integers(r, 999, at::kFloat).to(dev);
        comm->broadcast(b, 0);
        if (!torch::equal(b.cpu(), integers(0, 999, at::kFloat))) throw Error("broadcast");
        auto parts = comm->allgather(integers(r, 5, at::kInt).to(dev));
        for (int q = 0; q < world; ++q)
          if (!torch::equal(parts[q].cpu(), integers(q, 5, at::kInt))) throw Error("all-gather");
        comm->barrier();
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

// A collective that cannot complete: the caller's stream is held by a wait on host memory
// (cuStreamWaitValue32), so the all-reduce queued after it never runs. The watchdog aborts the
// communicator after the timeout and synchronize() throws, naming the all-reduce.
TEST(NcclCommunicatorTest, TheWatchdogAbortsAStuckCollective) {
  NEED_GPU();
  auto comm = makeNcclCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0,
                                   std::chrono::seconds(2));
  // Every kernel before the stream is held: with CUDA's lazy module loading, the first launch of
  // a kernel waits for the device to go idle, which a held stream never does (seen on an H100:
  // torch::ones after the hold never returned).
  at::Tensor x = torch::ones({1000}, torch::device(torch::kCUDA));
  comm->allreduceAsync(x, ReduceOp::Sum)->wait();
  comm->synchronize();
  uint32_t* flag = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof *flag, cudaHostAllocMapped),
            cudaSuccess);
  *flag = 0;
  void* devicePtr = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&devicePtr, flag, 0), cudaSuccess);
  cudaStream_t caller = c10::cuda::getCurrentCUDAStream(0).stream();
  // From the driver itself (loaded by the runtime already): the build links no libcuda.
  using WaitValue = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* symbol = driver ? dlsym(driver, "cuStreamWaitValue32_v2") : nullptr;
  if (driver && !symbol) symbol = dlsym(driver, "cuStreamWaitValue32");
  const CUresult held =
      symbol ? reinterpret_cast<WaitValue>(symbol)(caller, reinterpret_cast<CUdeviceptr>(devicePtr),
                                                   1, CU_STREAM_WAIT_VALUE_GEQ)
             : CUDA_ERROR_NOT_FOUND;
  if (held != CUDA_SUCCESS) {
    cudaFreeHost(flag);
    GTEST_SKIP() << "this GPU cannot wait on host memory (cuStreamWaitValue32: " << held << ")";
  }
  const auto started = std::chrono::steady_clock::now();
  // The stream is let go 8 s on, whatever happens: ncclCommAbort, which waits for NCCL's stream
  // (itself waiting on the caller's), ends then; synchronize() must not wait for it.
  std::thread release([flag] {
    std::this_thread::sleep_for(std::chrono::seconds(8));
    *reinterpret_cast<volatile uint32_t*>(flag) = 1;
  });
  comm->allreduceAsync(x, ReduceOp::Sum)->wait();
  try {
    comm->synchronize();
    ADD_FAILURE() << "synchronize returned on a stuck all-reduce";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all-reduce of 1000 Float elements did not complete "
                                         "within 2000 ms"),
              std::string::npos)
        << e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(waited, 5.0);  // the 2 s timeout and one watchdog period, not the 8 s release
  EXPECT_THROW(comm->barrier(), Error);  // at once too, while the abort may still run
  release.join();
  cudaStreamSynchronize(caller);
  comm.reset();  // waits for the abort, which the released stream lets finish
  cudaFreeHost(flag);
}

TEST(AcceleratorCudaTest, Fp16SkipsTheStepWhoseGradientsOverflow) {
  NEED_GPU();
  setenv("ACCELERATE_MIXED_PRECISION", "fp16", 1);
  Accelerator acc;
  unsetenv("ACCELERATE_MIXED_PRECISION");
  ASSERT_EQ(acc.device(), torch::Device(torch::kCUDA, 0));
  torch::nn::Linear model(8, 1);
  torch::optim::SGD opt(model->parameters(), 0.1);
  acc.prepare(*model, opt);
  ASSERT_TRUE(model->weight.is_cuda());
  const at::Tensor before = model->weight.detach().clone();
  at::Tensor x = acc.toDevice(torch::ones({4, 8}));
  acc.accumulate();
  {
    auto cast = acc.autocast();
    acc.backward(model->forward(x).sum() * std::numeric_limits<float>::infinity());
  }
  EXPECT_FALSE(acc.step());
  EXPECT_TRUE(acc.optimizerStepWasSkipped());
  EXPECT_TRUE(torch::equal(model->weight.detach(), before));
  EXPECT_EQ(acc.scaler().currentScale(), 32768.0);
  acc.accumulate();
  {
    // The mean, not the sum: at the scale of 32768 the sum's weight gradient (4 * 32768) is past
    // fp16's 65504 and rightly skipped too, as torch's GradScaler would.
    auto cast = acc.autocast();
    acc.backward(model->forward(x).mean());
  }
  EXPECT_TRUE(acc.step());
  EXPECT_FALSE(torch::equal(model->weight.detach(), before));
}

}  // namespace
}  // namespace accel::comm
