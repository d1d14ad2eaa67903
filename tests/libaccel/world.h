#pragma once
// Ranks as threads: N communicators (Gloo, or shared memory: one segment mapped once per rank)
// over an in-process c10d::HashStore, each rank's body run on its own thread; the first
// exception is rethrown on the test's thread. A collective that does not complete within
// `timeout` throws on its rank, so a hang fails the test.

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "accel/accelerator.h"
#include "libaccel/comm/gloo_communicator.h"
#include "libaccel/comm/shm_communicator.h"

namespace accel::testing {

// The CPU communicators this libaccel has: Gloo and shared memory, or shared memory alone where
// LibTorch ships no Gloo headers (pip's torch; cmake/torch_nccl.cmake). kCpuBackend: Gloo where
// there is one, as the tests were written for.
#if ACCEL_HAVE_GLOO
inline constexpr CpuBackend kCpuBackend = CpuBackend::Gloo;
inline std::vector<CpuBackend> cpuBackends() {
  return {CpuBackend::Gloo, CpuBackend::SharedMemory};
}
#else
inline constexpr CpuBackend kCpuBackend = CpuBackend::SharedMemory;
inline std::vector<CpuBackend> cpuBackends() { return {CpuBackend::SharedMemory}; }
#endif

// An Accelerator of rank `rank` over `comm`, fp32, no accumulation.
inline AcceleratorOptions optionsFor(std::shared_ptr<Communicator> comm, int rank) {
  AcceleratorOptions o;
  o.communicator = std::move(comm);
  o.local_rank = rank;
  o.mixed_precision = MixedPrecision::No;
  o.gradient_accumulation_steps = 1;
  return o;
}

inline std::shared_ptr<Communicator> makeCommunicator(CpuBackend backend,
                                                      c10::intrusive_ptr<c10d::Store> store,
                                                      int rank, int world,
                                                      std::chrono::milliseconds timeout) {
  if (backend == CpuBackend::SharedMemory) {
    comm::ShmOptions options;
    options.timeout = timeout;
    options.tag = "libaccel-test";
    return comm::makeShmCommunicator(std::move(store), rank, world, options);
  }
  comm::GlooOptions options;
  options.timeout = timeout;
  return comm::makeGlooCommunicator(std::move(store), rank, world, options);
}

inline const char* backendName(CpuBackend backend) {
  return backend == CpuBackend::SharedMemory ? "Shm" : "Gloo";
}

inline void runRanks(int world, const std::function<void(std::shared_ptr<Communicator>, int)>& body,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30),
                     CpuBackend backend = kCpuBackend) {
  static int group = 0;
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::string prefix = "world" + std::to_string(group++);
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex m;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        std::shared_ptr<Communicator> comm = makeCommunicator(
            backend, c10::make_intrusive<c10d::PrefixStore>(prefix, store), rank, world, timeout);
        body(comm, rank);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace accel::testing
