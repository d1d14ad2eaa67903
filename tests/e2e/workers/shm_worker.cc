// A rank of tests/e2e/shm.sh, run under `accel launch --cpu -n N`:
//   shm_worker backend         prints "backend=<name>" of the communicator workers get by default
//   shm_worker compare         every collective on shared memory (on several machines: inside each,
//                              Gloo between them) against Gloo alone; prints "checks=<n>"
//   shm_worker hold DIR        writes DIR/pid.<rank>; rank 1 waits for DIR/release before joining
//                              (so rank 0's segment stays in /dev/shm), then all-reduces once
// Exits 1 with a message naming the first mismatch.
#include <sys/inotify.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "libaccel/comm/from_environment.h"

namespace {

using accel::Communicator;
using accel::CpuBackend;
using accel::ReduceOp;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "shm_worker: %s\n", why.c_str());
  std::exit(1);
}

std::shared_ptr<Communicator> make(std::optional<CpuBackend> backend) {
  accel::comm::EnvironmentOptions o;
  o.cpu_only = true;
  o.cpu_backend = backend;
  o.timeout = std::chrono::seconds(60);
  return accel::comm::communicatorFromEnvironment(o);
}

// Integer-valued data, exact in every dtype (sums of up to 4 ranks stay small), rank-specific.
at::Tensor integers(int rank, int64_t count, at::ScalarType dtype) {
  auto i = torch::arange(count, torch::kLong);
  auto v = (i * 7 + rank * 13) % 17;
  if (dtype != at::kByte) v = v - 8;
  return v.to(dtype);
}

const char* opName(ReduceOp op) {
  return op == ReduceOp::Sum ? "sum" : op == ReduceOp::Max ? "max" : "min";
}

int compareIntegers(Communicator& shm, Communicator& gloo) {
  int checks = 0;
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kChar, at::kByte,
                     at::kInt, at::kLong}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
      for (int64_t count : {int64_t{1}, int64_t{37}, int64_t{5000}, int64_t{1100000}}) {
        at::Tensor a = integers(shm.rank(), count, dtype), b = a.clone();
        shm.allreduce(a, op);
        // torch 1.13's Gloo has no bfloat16: its reference is the float32 all-reduce, rounded.
        if (dtype == at::kBFloat16) b = b.to(at::kFloat);
        gloo.allreduce(b, op);
        b = b.to(dtype);
        if (!torch::equal(a, b)) {
          die(std::string("all-reduce ") + opName(op) + " of " + std::to_string(count) + " " +
              c10::toString(dtype) + ": shared memory and Gloo differ by " +
              std::to_string((a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>()));
        }
        ++checks;
      }
    }
  }
  return checks;
}

// Random fp32 sums: within 1e-6 of Gloo's relative to the sum of magnitudes (the bound any
// order of additions meets), the same bits on a second run, and on every rank.
int compareRandom(Communicator& shm, Communicator& gloo) {
  int checks = 0;
  for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{100000}, int64_t{3000000}}) {
    torch::manual_seed(1000 + shm.rank());
    at::Tensor x = torch::randn({count});
    at::Tensor a = x.clone(), b = x.clone(), again = x.clone(), magnitude = x.abs();
    shm.allreduce(a);
    gloo.allreduce(b);
    shm.allreduce(again);
    gloo.allreduce(magnitude);
    const double worst = ((a - b).abs() / magnitude.clamp_min(1e-30)).max().item<double>();
    if (worst > 1e-6)
      die("random all-reduce of " + std::to_string(count) + " floats: " + std::to_string(worst) +
          " relative from Gloo's");
    if (!torch::equal(a, again))
      die("random all-reduce of " + std::to_string(count) + " floats: not the same bits twice");
    auto rows = shm.allgather(a.narrow(0, 0, std::min<int64_t>(count, 4096)));
    for (const auto& row : rows) {
      if (!torch::equal(row, rows[0])) die("random all-reduce: ranks hold different results");
    }
    checks += 3;
  }
  return checks;
}

int compareOthers(Communicator& shm, Communicator& gloo) {
  int checks = 0;
  const int n = shm.size(), rank = shm.rank();
  for (int root = 0; root < n; ++root) {
    at::Tensor a = integers(rank, 300000, at::kInt) + rank * 1000, b = a.clone();
    shm.broadcast(a, root);
    gloo.broadcast(b, root);
    if (!torch::equal(a, b) || !torch::equal(a, integers(root, 300000, at::kInt) + root * 1000)) {
      die("broadcast from rank " + std::to_string(root) + " differs");
    }
    ++checks;
  }
  at::Tensor mine = integers(rank, 1200000, at::kLong) * (rank + 1);
  auto a = shm.allgather(mine), b = gloo.allgather(mine);
  if (a.size() != static_cast<size_t>(n))
    die("all-gather returned " + std::to_string(a.size()) + " tensors");
  for (int r = 0; r < n; ++r) {
    if (!torch::equal(a[r], b[r]) ||
        !torch::equal(a[r], integers(r, 1200000, at::kLong) * (r + 1))) {
      die("all-gather: rank " + std::to_string(r) + "'s tensor differs");
    }
  }
  shm.barrier();
  gloo.barrier();
  return checks + 2;
}

void waitForFile(const std::string& dir, const std::string& name) {
  const int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0)
    die("inotify on " + dir);
  while (access((dir + "/" + name).c_str(), F_OK) != 0) {
    char events[4096];
    if (read(fd, events, sizeof events) <= 0) die("inotify read");
  }
  close(fd);
}

}  // namespace

int run(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "backend") {
    auto comm = make(std::nullopt);
    // As a real job's first collective would: a rank that exits while its peer still completes
    // Gloo's connection handshake fails that peer ("Connection closed by peer").
    comm->barrier();
    std::printf("backend=%s\n", comm->backend());
  } else if (mode == "compare") {
    auto shm = make(CpuBackend::SharedMemory), gloo = make(CpuBackend::Gloo);
    // One machine: "shm"; several: shared memory inside each machine, Gloo between, "hier".
    const std::string kind = shm->backend();
    if ((kind != "shm" && kind != "hier") || std::string(gloo->backend()) != "gloo")
      die("wrong backends: " + kind);
    const int checks =
        compareIntegers(*shm, *gloo) + compareRandom(*shm, *gloo) + compareOthers(*shm, *gloo);
    std::printf("checks=%d\n", checks);
  } else if (mode == "hold" && argc > 2) {
    const std::string dir = argv[2];
    const char* rank = std::getenv("RANK");
    std::ofstream(dir + "/pid." + (rank ? rank : "?")) << getpid() << "\n";
    if (rank && std::string(rank) == "1") waitForFile(dir, "release");
    auto comm = make(CpuBackend::SharedMemory);
    at::Tensor t = torch::ones({4});
    comm->allreduce(t);
    std::printf("sum=%g\n", t[0].item<double>());
  } else {
    die("usage: shm_worker backend | compare | hold DIR");
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    die(e.what());
  }
}
