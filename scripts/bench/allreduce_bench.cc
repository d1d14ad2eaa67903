// One all-reduce benchmark rank: run under `accel launch --cpu -n N`. For each size (float32
// elements, 1 KiB to 64 MiB), times in-place sum all-reduces through libaccel's communicator
// for each backend named on the command line and prints, on rank 0, one line per (backend,
// size): "allreduce <backend> <bytes> <microseconds per op>", the backend as the communicator
// names itself. "shm" asks for shared memory (on several machines: inside each, with Gloo
// between them, "hier"), "gloo" for Gloo alone; "memcpy" times, on every rank at once, a memcpy
// of the same bytes between two private buffers (the memory's speed with every rank busy: the
// floor the all-reduce is compared with), coordinated through the shared-memory communicator;
// "exchange" (2 ranks) the data movement alone that any all-reduce of 2 processes needs at the
// least, with no arithmetic: each rank publishes half its bytes into shared memory and, after a
// barrier, copies the other's half; then the same again (the inputs, then the results);
// "bf16wire" the shared-memory all-reduce of float32 with bfloat16 on the wire
// (allreduceBf16WireAsync, DDP's bf16_compress_hook), printed under that name; "mean" the
// shared-memory average (allreduceMeanAsync: each part divided by the ranks on the way), and
// "mean-pass" the same average as a division in a pass of its own (mul_), then the sum (every
// rank's tensor is all ones, so the average stays ones however often it runs); "bf16wire-mean"
// and "bf16wire-mean-pass" the bf16 wire's average, divided on the way and in a pass of its own.
//   allreduce_bench [--min-seconds S] memcpy exchange shm bf16wire mean mean-pass bf16wire-mean
//                   bf16wire-mean-pass gloo
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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

constexpr size_t kMaxBytes = size_t{64} << 20;

// A shared-memory area of two halves of kMaxBytes / 2, one written by each of 2 ranks: rank 0
// makes it, rank 1 maps it after a barrier, and it is unlinked once both hold it.
class PairArea {
 public:
  explicit PairArea(accel::Communicator& comm) {
    const char* port = std::getenv("MASTER_PORT");  // one per job
    const std::string name = "/accel-bench-exchange-" + std::string(port ? port : "0");
    if (comm.rank() == 0) map(name, O_CREAT | O_EXCL | O_RDWR);
    comm.barrier();
    if (comm.rank() == 1) map(name, O_RDWR);
    comm.barrier();
    if (comm.rank() == 0) ::shm_unlink(name.c_str());
  }
  ~PairArea() { ::munmap(base_, kMaxBytes); }
  char* half(int rank) const { return base_ + static_cast<size_t>(rank) * (kMaxBytes / 2); }

 private:
  void map(const std::string& name, int flags) {
    const int fd = ::shm_open(name.c_str(), flags, 0600);
    if (fd < 0 || (flags & O_CREAT && ::ftruncate(fd, kMaxBytes) != 0)) {
      std::perror(("allreduce_bench: " + name).c_str());
      std::exit(1);
    }
    base_ =
        static_cast<char*>(::mmap(nullptr, kMaxBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
    if (base_ == MAP_FAILED) {
      std::perror("allreduce_bench: mmap");
      std::exit(1);
    }
  }
  char* base_ = nullptr;
};

double timeOne(accel::Communicator& comm, size_t bytes, double minSeconds,
               const std::string& mode) {
  at::Tensor t = at::ones({static_cast<int64_t>(bytes / 4)}, at::kFloat);
  if (mode == "memcpy") {
    at::Tensor to = at::empty_like(t);
    return timeOp(
        comm, [&] { std::memcpy(to.data_ptr(), t.data_ptr(), bytes); }, minSeconds);
  }
  if (mode == "mean")  // scaled on the way, where the communicator can
    return timeOp(
        comm, [&] { comm.allreduceMeanAsync(t)->wait(); }, minSeconds);
  if (mode == "mean-pass")  // scaled in a pass of its own (mul_), then summed
    return timeOp(
        comm, [&] { comm.Communicator::allreduceMeanAsync(t)->wait(); }, minSeconds);
  if (mode.rfind("bf16wire", 0) == 0) {
    at::Tensor wire = at::empty_like(t, at::kBFloat16);
    if (mode == "bf16wire-mean-pass") {
      return timeOp(
          comm,
          [&] {
            t.mul_(1.0 / comm.size());
            comm.allreduceBf16WireAsync(t, wire, false)->wait();
          },
          minSeconds);
    }
    const bool mean = mode == "bf16wire-mean";
    return timeOp(
        comm, [&] { comm.allreduceBf16WireAsync(t, wire, mean)->wait(); }, minSeconds);
  }
  if (mode != "exchange")
    return timeOp(
        comm, [&] { comm.allreduce(t); }, minSeconds);
  static PairArea area(comm);
  char* data = static_cast<char*>(t.data_ptr());
  const size_t half = bytes / 2;
  const int me = comm.rank(), other = 1 - me;
  auto exchange = [&] {  // rank r publishes the half rank 1 - r needs, then fetches its own
    std::memcpy(area.half(me), data + other * half, half);
    comm.barrier();
    std::memcpy(data + other * half, area.half(other), half);
    comm.barrier();
  };
  return timeOp(
      comm,
      [&] {
        exchange();
        exchange();
      },
      minSeconds);
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
    if (name == "exchange" && comm->size() != 2) continue;  // the pair's floor only
    // "shm" prints the backend it got ("hier" across machines); the other modes their own name.
    const bool namedByBackend = name == "shm" || name == "gloo";
    for (size_t bytes = 1024; bytes <= kMaxBytes; bytes *= 4) {
      const double us = timeOne(*comm, bytes, minSeconds, name);
      if (comm->rank() == 0)
        std::printf("allreduce %s %zu %.2f\n", namedByBackend ? comm->backend() : name.c_str(),
                    bytes, us);
      std::fflush(stdout);
    }
  }
  return 0;
}
