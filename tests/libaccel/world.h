#pragma once
// Ranks as threads: N Gloo communicators over an in-process c10d::HashStore, each rank's body
// run on its own thread; the first exception is rethrown on the test's thread. A collective
// that does not complete within `timeout` throws on its rank, so a hang fails the test.

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

namespace accel::testing {

// An Accelerator of rank `rank` over `comm`, fp32, no accumulation.
inline AcceleratorOptions optionsFor(std::shared_ptr<Communicator> comm, int rank) {
  AcceleratorOptions o;
  o.communicator = std::move(comm);
  o.local_rank = rank;
  o.mixed_precision = MixedPrecision::No;
  o.gradient_accumulation_steps = 1;
  return o;
}

inline void runRanks(int world, const std::function<void(std::shared_ptr<Communicator>, int)>& body,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  static int group = 0;
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::string prefix = "world" + std::to_string(group++);
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex m;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        comm::GlooOptions options;
        options.timeout = timeout;
        std::shared_ptr<Communicator> comm =
            comm::makeGlooCommunicator(c10::make_intrusive<c10d::PrefixStore>(prefix, store), rank, world, options);
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
