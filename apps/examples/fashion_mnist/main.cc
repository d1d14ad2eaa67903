// Fashion-MNIST on libaccel: run it with `accel launch -n 2 build/apps/examples/fashion_mnist`.
// Rank 0 shows progress, the loss and the test accuracy.

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <tuple>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "accel/accelerator.h"
#include "accel/idx.h"
#include "apps/examples/fashion_mnist/models.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr float kMean = 0.2860f, kStd = 0.3530f;

struct Options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string model = "mlp";
  int epochs = 1;
  int64_t max_steps = 0;  // 0: whole epochs
  int64_t batch = 64;     // per rank
  bool shuffle = true;
  uint64_t seed = 0;
  std::string mixed_precision;  // empty: $ACCELERATE_MIXED_PRECISION
  bool progress = true;
  bool evaluate = true;
  std::string save_state, load_state;
};

// Every step allocates and frees the same activation and gradient buffers, a few MB each.
// glibc's defaults serve blocks that large with fresh mmap()s and give freed heap tops back to
// the kernel, so every step page-faulted tens of MB of newly zeroed memory (perf stat, CNN at
// N=1: ~8000 page faults per step, clear_page the top kernel symbol). Keeping freed blocks in
// the heap lets the next step reuse them. Costs at most the peak of one step in RSS.
void keepFreedMemoryForReuse() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: only the dataset is mapped
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

// Images stay uint8 in memory (47 MB instead of 188 MB for the training set); each batch is
// converted and normalised when it is used.
torch::Tensor loadImages(const std::string& path) { return accel::readIdx(path).unsqueeze(1); }

torch::Tensor normalise(const torch::Tensor& images) {
  return images.to(torch::kFloat).div_(255.0f).sub_(kMean).div_(kStd);
}

// Test accuracy: each rank scores its share; gatherForMetrics counts every image once.
// Returns {correct, total} over all ranks.
template <typename Model>
std::pair<int64_t, int64_t> evaluate(Model& model, accel::Accelerator& acc,
                                     const torch::Tensor& testX, const torch::Tensor& testY) {
  model->eval();
  torch::NoGradGuard noGrad;
  accel::ShardOptions shard;
  shard.dataset_size = static_cast<size_t>(testX.size(0));
  shard.batch_size = 500;
  accel::ShardedBatchSampler sampler(shard, acc.processIndex(), acc.numProcesses());
  auto batches = sampler.batches();
  int64_t correct = 0, total = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    auto idx = torch::tensor(std::vector<int64_t>(batches[i].begin(), batches[i].end()));
    torch::Tensor logits;
    {
      auto cast = acc.autocast();
      logits = model->forward(normalise(testX.index_select(0, idx)));
    }
    auto hit = logits.argmax(1).eq(testY.index_select(0, idx)).to(torch::kLong);
    auto all = acc.gatherForMetrics(hit, sampler, i + 1 == batches.size());
    correct += all.sum().item<int64_t>();
    total += all.size(0);
  }
  return {correct, total};
}

template <typename Model>
std::unique_ptr<torch::optim::Optimizer> makeOptimizer(Model& model, const Options& o) {
  if (o.model == "mlp") {
    return std::make_unique<torch::optim::SGD>(model->parameters(),
                                               torch::optim::SGDOptions(0.01).momentum(0.9));
  }
  return std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
}

// What the training loop measured (the losses are rank 0's).
struct TrainStats {
  int64_t steps = 0;
  double first_step_s = -1;  // from the start of the run to the end of the first step
  float first_loss = 0, last_loss = 0;
};

void printProgress(const Options& o, int epoch, size_t done, size_t of, float loss) {
  const int width = 30;
  int filled = static_cast<int>(width * done / of);
  std::printf("\repoch %d/%d [%s%s] %zu/%zu loss %.4f", epoch + 1, o.epochs,
              std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(), done, of,
              loss);
  std::fflush(stdout);
}

// The epochs (or o.max_steps steps) over this rank's shard of the training set.
template <typename Model>
TrainStats train(Model& model, const Options& o, accel::Accelerator& acc,
                 const torch::Tensor& trainX, const torch::Tensor& trainY,
                 Clock::time_point start) {
  accel::ShardOptions shard;
  shard.dataset_size = static_cast<size_t>(trainX.size(0));
  shard.batch_size = static_cast<size_t>(o.batch);
  shard.shuffle = o.shuffle;
  shard.seed = o.seed;
  accel::ShardedBatchSampler sampler(shard, acc.processIndex(), acc.numProcesses());
  TrainStats stats;
  for (int epoch = 0; epoch < o.epochs && (o.max_steps == 0 || stats.steps < o.max_steps);
       ++epoch) {
    model->train();
    sampler.setEpoch(static_cast<uint64_t>(epoch));
    auto batches = sampler.batches();
    for (size_t i = 0; i < batches.size(); ++i) {
      if (o.max_steps && stats.steps >= o.max_steps) break;
      auto idx = torch::tensor(std::vector<int64_t>(batches[i].begin(), batches[i].end()));
      auto x = normalise(trainX.index_select(0, idx)), y = trainY.index_select(0, idx);
      acc.accumulate(i + 1 == batches.size());
      torch::Tensor logits;
      {
        auto cast = acc.autocast();
        logits = model->forward(x);
      }
      auto loss = torch::cross_entropy_loss(logits.to(torch::kFloat), y);
      acc.backward(loss);
      acc.step();
      ++stats.steps;
      if (stats.first_step_s < 0) {
        stats.first_step_s = std::chrono::duration<double>(Clock::now() - start).count();
      }
      if (acc.isMainProcess()) stats.last_loss = loss.item<float>();
      if (stats.steps == 1) stats.first_loss = stats.last_loss;
      if (o.progress && acc.isMainProcess() && (stats.steps % 20 == 0 || i + 1 == batches.size())) {
        printProgress(o, epoch, i + 1, batches.size(), stats.last_loss);
      }
    }
    if (o.progress && acc.isMainProcess()) std::printf("\n");
  }
  return stats;
}

template <typename Model>
int run(Model model, const Options& o, accel::Accelerator& acc) {
  const auto start = Clock::now();
  auto trainX = loadImages(o.data + "/train-images-idx3-ubyte.gz");
  auto trainY = accel::readIdx(o.data + "/train-labels-idx1-ubyte.gz").to(torch::kLong);
  auto testX = loadImages(o.data + "/t10k-images-idx3-ubyte.gz");
  auto testY = accel::readIdx(o.data + "/t10k-labels-idx1-ubyte.gz").to(torch::kLong);

  auto optimizer = makeOptimizer(model, o);
  acc.prepare(*model, *optimizer);
  if (!o.load_state.empty()) {
    acc.loadState(o.load_state);
    acc.print("resumed from " + o.load_state + " at step " + std::to_string(acc.stepCount()));
  }

  auto trainStart = Clock::now();
  const TrainStats stats = train(model, o, acc, trainX, trainY, start);
  acc.waitForEveryone();
  const double trainSeconds = std::chrono::duration<double>(Clock::now() - trainStart).count();
  if (!o.save_state.empty()) acc.saveState(o.save_state);

  int64_t correct = 0, total = 0;
  if (o.evaluate) std::tie(correct, total) = evaluate(model, acc, testX, testY);
  const double samplesPerSecond =
      static_cast<double>(stats.steps * o.batch * acc.numProcesses()) / trainSeconds;
  char line[512];
  std::snprintf(line, sizeof line,
                "model %s, %d processes (%s), %s: %lld steps, first loss %.4f, final loss %.4f, "
                "test accuracy %.2f%% (%lld/%lld), "
                "%.0f samples/s, first step after %.2f s",
                o.model.c_str(), acc.numProcesses(), acc.communicator().backend(),
                acc.mixedPrecision() == accel::MixedPrecision::Bf16 ? "bf16" : "fp32",
                static_cast<long long>(stats.steps), stats.first_loss, stats.last_loss,
                100.0 * static_cast<double>(correct) / static_cast<double>(total),
                static_cast<long long>(correct), static_cast<long long>(total), samplesPerSecond,
                stats.first_step_s);
  acc.print(line);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Fashion-MNIST on libaccel (run under `accel launch`)"};
  app.add_option("--data", o.data, "Directory with the four idx files (.gz)");
  app.add_option("--model", o.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--epochs", o.epochs, "Epochs")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.max_steps, "Stop after this many steps (0: whole epochs)");
  app.add_option("--batch", o.batch, "Batch size per rank")->check(CLI::PositiveNumber);
  app.add_flag("--shuffle,!--no-shuffle", o.shuffle,
               "Shuffle each epoch (off: file order, batch i to rank i mod N)");
  app.add_option("--seed", o.seed, "Seed, set before the model is built");
  app.add_option("--mixed_precision,--mixed-precision", o.mixed_precision,
                 "no or bf16 (default: from accel launch)")
      ->check(CLI::IsMember({"no", "bf16", "fp16"}));
  app.add_flag("--progress,!--no-progress", o.progress, "Progress bar on rank 0");
  app.add_flag("--eval,!--no-eval", o.evaluate, "Measure test accuracy after training");
  app.add_option("--save_state", o.save_state, "Save a checkpoint here after training");
  app.add_option("--load_state", o.load_state, "Resume from this checkpoint");
  CLI11_PARSE(app, argc, argv);

  keepFreedMemoryForReuse();
  try {
    accel::AcceleratorOptions options;
    if (o.mixed_precision == "bf16") options.mixed_precision = accel::MixedPrecision::Bf16;
    if (o.mixed_precision == "fp16") options.mixed_precision = accel::MixedPrecision::Fp16;
    if (o.mixed_precision == "no") options.mixed_precision = accel::MixedPrecision::No;
    accel::Accelerator acc(options);
    acc.setSeed(o.seed);
    if (o.model == "mlp") return run(accel::examples::Mlp(), o, acc);
    return run(accel::examples::Cnn(), o, acc);
  } catch (const std::exception& e) {
    std::cerr << "fashion_mnist: " << e.what() << std::endl;
    return 1;
  }
}
