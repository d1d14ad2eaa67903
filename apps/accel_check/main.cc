// accel-check: libaccel's part of `accel test` (apps/accel/test_command.cc), run by accel launch
// on every rank of the config under test. An Accelerator from the environment the launch gives
// (the communicator libaccel picks for it: shared memory, Gloo or NCCL), then an all-reduce of
// rank + 1, a gather of the ranks and a barrier through it. One line per check, as the python
// checks print them; exit 1 at the first that fails.

#include <cstdio>
#include <exception>
#include <string>

#include <torch/types.h>

#include "accel/accelerator.h"

namespace {

bool check(const char* name, bool ok, const std::string& detail) {
  std::printf("libaccel %s: %s (%s)\n", name, ok ? "ok" : "FAILED", detail.c_str());
  std::fflush(stdout);
  return ok;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

int runChecks() {
  accel::Accelerator acc;
  const int rank = acc.processIndex(), world = acc.numProcesses();
  check("communicator", true,
        std::string(acc.communicator().backend()) + ", rank " + std::to_string(rank) + " of " +
            std::to_string(world) + " on " + acc.device().str());
  const double sum = acc.reduce(acc.toDevice(torch::tensor({rank + 1.0}))).item<double>();
  const double want = world * (world + 1) / 2.0;
  if (!check("all_reduce", sum == want,
             "sum of rank+1 over " + std::to_string(world) + " rank(s): " + number(sum) +
                 ", want " + number(want)))
    return 1;
  const at::Tensor ranks = acc.gather(acc.toDevice(torch::tensor({rank}, torch::kLong))).cpu();
  if (!check("gather", torch::equal(ranks, torch::arange(world, torch::kLong)),
             "rank order 0.." + std::to_string(world - 1)))
    return 1;
  acc.waitForEveryone();
  check("barrier", true, "every rank arrived");
  return 0;
}

}  // namespace

int main() {
  try {
    return runChecks();
  } catch (const std::exception& e) {
    check("communicator", false, e.what());
    return 1;
  }
}
