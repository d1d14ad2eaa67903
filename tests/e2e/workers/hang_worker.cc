// A rank of tests/e2e/watch.sh, trained with libaccel's Accelerator under `accel launch --cpu`:
//   hang_worker STUCK_RANK STEP MARKER   trains a small model; at optimizer step STEP, rank
//                                        STUCK_RANK writes the time to MARKER and sleeps in
//                                        stuckBeforeBackward() (before its gradient sync) while the
//                                        others wait for it in the sync
// Each step ends with 20 ms of "work" (a sleep); rank $SLOW_RANK sleeps 60 ms, three times as long
// (a straggler). $STEPS: the steps to train (default 100000).
// Linked with -rdynamic (ENABLE_EXPORTS) so its own functions are named in the stack libaccel
// prints on SIGABRT.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <accel/accelerator.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

// Where the test expects the stuck rank's stack to be: not inlined, so it is a frame of its own,
// and of external linkage, so -rdynamic exports its name.
[[gnu::noinline]] void stuckBeforeBackward(const char* marker) {
  {
    std::ofstream out(std::string(marker) + ".tmp");
    out << std::fixed
        << std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count()
        << "\n";
  }
  std::rename((std::string(marker) + ".tmp").c_str(), marker);
  std::this_thread::sleep_for(std::chrono::minutes(10));
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: hang_worker STUCK_RANK STEP MARKER\n");
    return 2;
  }
  const int stuckRank = std::atoi(argv[1]);
  const int stuckStep = std::atoi(argv[2]);
  const char* slow = std::getenv("SLOW_RANK");
  const char* steps = std::getenv("STEPS");
  accel::Accelerator accelerator;
  torch::manual_seed(0);
  torch::nn::Linear model(8, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
  accelerator.prepare(*model, optimizer);
  const auto work =
      std::chrono::milliseconds(slow && std::atoi(slow) == accelerator.processIndex() ? 60 : 20);
  for (int step = 0; step < (steps ? std::atoi(steps) : 100000); ++step) {
    at::Tensor x = torch::randn({16, 8});
    at::Tensor loss = model->forward(x).pow(2).mean();
    if (accelerator.processIndex() == stuckRank && step == stuckStep) stuckBeforeBackward(argv[3]);
    accelerator.backward(loss);
    accelerator.step();
    std::this_thread::sleep_for(work);
  }
  return 0;
}
