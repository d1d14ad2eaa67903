// One all-reduce benchmark rank: run under `accel launch --cpu -n N`. For each size (float32
// elements, 1 KiB to 64 MiB), times in-place sum all-reduces through libaccel's communicator
// for each backend named on the command line and prints, on rank 0, one line per (backend,
// size): "allreduce <backend> <bytes> <microseconds per op>", the backend as the communicator
// names itself. "shm" asks for shared memory (on several machines: inside each, with Gloo
// between them, "hier"), "gloo" for Gloo alone.
//   allreduce_bench [--min-seconds S] shm gloo
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "libaccel/comm/from_environment.h"

namespace {

double timeOne(accel::Communicator& comm, size_t bytes, double minSeconds) {
  at::Tensor t = at::ones({static_cast<int64_t>(bytes / 4)}, at::kFloat);
  for (int i = 0; i < 3; ++i) comm.allreduce(t);  // warm up: pages, caches
  // Rank 0 decides how many iterations fill minSeconds, so every rank runs the same number.
  using Clock = std::chrono::steady_clock;
  int iterations = 1;
  for (;;) {
    comm.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) comm.allreduce(t);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    at::Tensor enough = at::full({1}, seconds >= minSeconds ? 1 : 0, at::kInt);
    comm.broadcast(enough, 0);
    if (enough.item<int>() == 1) return seconds / iterations * 1e6;
    iterations *= 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  double minSeconds = 0.2;
  std::vector<std::string> backends;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-seconds" && i + 1 < argc)
      minSeconds = std::atof(argv[++i]);
    else
      backends.push_back(a);
  }
  for (const auto& name : backends) {
    accel::comm::EnvironmentOptions o;
    o.cpu_only = true;
    o.cpu_backend = name == "shm" ? accel::CpuBackend::SharedMemory : accel::CpuBackend::Gloo;
    auto comm = accel::comm::communicatorFromEnvironment(o);
    for (size_t bytes = 1024; bytes <= (size_t{64} << 20); bytes *= 4) {
      const double us = timeOne(*comm, bytes, minSeconds);
      if (comm->rank() == 0) std::printf("allreduce %s %zu %.1f\n", comm->backend(), bytes, us);
      std::fflush(stdout);
    }
  }
  return 0;
}
