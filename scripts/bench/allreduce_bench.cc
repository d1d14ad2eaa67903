// One all-reduce benchmark rank: run under `accel launch --cpu -n N`. For each size (float32
// elements, 1 KiB to 64 MiB), times in-place sum all-reduces through libaccel's communicator
// for each backend named on the command line and prints, on rank 0, one line per (backend,
// size): "allreduce <backend> <bytes> <microseconds per op>", the backend as the communicator
// names itself. "shm" asks for shared memory (on several machines: inside each, with Gloo
// between them, "hier"), "gloo" for Gloo alone; "memcpy" times, on every rank at once, a memcpy
// of the same bytes between two private buffers (the memory's speed with every rank busy: the
// floor the all-reduce is compared with), coordinated through the shared-memory communicator.
//   allreduce_bench [--min-seconds S] memcpy shm gloo
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "libaccel/comm/from_environment.h"

namespace {

// Microseconds per `op()`, after 3 warm-up calls (pages, caches). Rank 0 decides how many
// iterations fill minSeconds, so every rank runs the same number.
double timeOp(accel::Communicator& comm, const std::function<void()>& op, double minSeconds) {
  for (int i = 0; i < 3; ++i) op();
  using Clock = std::chrono::steady_clock;
  int iterations = 1;
  for (;;) {
    comm.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) op();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    at::Tensor enough = at::full({1}, seconds >= minSeconds ? 1 : 0, at::kInt);
    comm.broadcast(enough, 0);
    if (enough.item<int>() == 1) return seconds / iterations * 1e6;
    iterations *= 2;
  }
}

double timeOne(accel::Communicator& comm, size_t bytes, double minSeconds, bool copyOnly) {
  at::Tensor t = at::ones({static_cast<int64_t>(bytes / 4)}, at::kFloat);
  if (!copyOnly)
    return timeOp(
        comm, [&] { comm.allreduce(t); }, minSeconds);
  at::Tensor to = at::empty_like(t);
  return timeOp(
      comm, [&] { std::memcpy(to.data_ptr(), t.data_ptr(), bytes); }, minSeconds);
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
    o.cpu_backend = name == "gloo" ? accel::CpuBackend::Gloo : accel::CpuBackend::SharedMemory;
    auto comm = accel::comm::communicatorFromEnvironment(o);
    const bool copyOnly = name == "memcpy";
    for (size_t bytes = 1024; bytes <= (size_t{64} << 20); bytes *= 4) {
      const double us = timeOne(*comm, bytes, minSeconds, copyOnly);
      if (comm->rank() == 0)
        std::printf("allreduce %s %zu %.2f\n", copyOnly ? "memcpy" : comm->backend(), bytes, us);
      std::fflush(stdout);
    }
  }
  return 0;
}
