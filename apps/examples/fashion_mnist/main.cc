// Fashion-MNIST on libaccel: run it with `accel launch -n 2 build/apps/examples/fashion_mnist`.
// Rank 0 shows progress, the loss and the test accuracy.
//
// Elastic jobs (README, "Elastic jobs"): with --checkpoint_dir every round of the job resumes from
// the last checkpoint, on whatever number of processes it has. --global_batch keeps the samples of
// each optimizer step the same on any number of processes (batch i of an epoch goes to rank
// i mod N, so step s takes samples [s*G, (s+1)*G) of the epoch's order) and --steps counts
// optimizer steps of the whole job, so a job that lost and regained machines ends where one that
// never failed ends, with the same model up to the order of floating-point sums.

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

#include <CLI/CLI.hpp>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

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
  int64_t max_steps = 0;  // 0: whole epochs; else the job's optimizer steps (a resumed run's too)
  int64_t batch = 64;     // per rank
  int64_t global_batch = 0;  // 0: `batch` per rank; else split over the ranks
  bool shuffle = true;
  uint64_t seed = 0;
  std::string mixed_precision;  // empty: $ACCELERATE_MIXED_PRECISION
  std::string device = "auto";  // auto: the Accelerator's choice (a GPU when one is visible)
  bool progress = true;
  bool evaluate = true;
  std::string save_state, load_state;
  std::string checkpoint_dir;  // DIR/latest: written every checkpoint_every steps, resumed from
  int64_t checkpoint_every = 50;
  bool profile = false;     // each rank prints where a step's time went, averaged over the run
  bool no_foreach = false;  // LibTorch's per-parameter Adam step, also on a GPU
  // A benchmark's reference, not training: gradients are not averaged (each rank trains its own
  // copy), the ranks only meet at one barrier per step (scripts/bench/train.sh).
  bool barrier_only = false;
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

// A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:"); -1 where there is none.
long statusKib(const char* field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  }
  return -1;
}

// The peak RSS of training alone: the high-water mark is set back to the current RSS when training
// starts (Linux's clear_refs "5"), so the data set loaded before it does not hide what the steps
// add (e.g. one gradient copy more or less).
class TrainingPeak {
 public:
  TrainingPeak() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    reset_ = static_cast<bool>(out.flush());
    start_kib_ = statusKib("VmRSS:");
  }
  // "; training's peak RSS +X.X MiB over its start", or "" where the kernel keeps no such mark.
  std::string describe() const {
    const long peak = statusKib("VmHWM:");
    if (!reset_ || start_kib_ < 0 || peak < 0) return "";
    char text[96];
    std::snprintf(text, sizeof text, "; training's peak RSS +%.1f MiB over its start",
                  static_cast<double>(peak - start_kib_) / 1024.0);
    return text;
  }

 private:
  bool reset_ = false;
  long start_kib_ = -1;
};

// Images stay uint8 in the host's memory (47 MB instead of 188 MB for the training set); each
// batch is converted and normalised when it is used. On a GPU the set is normalised once
// (188 MB of device memory): four small kernels less per step.
torch::Tensor loadImages(const std::string& path) { return accel::readIdx(path).unsqueeze(1); }

torch::Tensor normalise(const torch::Tensor& images) {
  if (images.scalar_type() != torch::kByte) return images;  // normalised already
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
    auto idx =
        acc.toDevice(torch::tensor(std::vector<int64_t>(batches[i].begin(), batches[i].end())));
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

// What the training loop measured (first_loss is rank 0's; last_loss this rank's).
struct TrainStats {
  int64_t steps = 0;         // batches trained in this run
  double first_step_s = -1;  // from the start of the run to the end of the first step
  float first_loss = 0;
  torch::Tensor last_loss;
};

// "profile (rank 1, ms per step over 299 steps, CUDA events): data 0.021, forward 0.190,
// backward 0.302, sync 0.120, optimizer 0.035, other 0.010 (step 0.678): 94395 samples/s at
// that pace". sync is waiting for the gradients' all-reduces; other, the loop's own work
// between steps. The same line as scripts/bench/support/ddp_fashion_mnist.py --profile.
void printProfile(accel::StepProfile& profile, int rank, int64_t samplesPerStep) {
  const auto r = profile.report();
  if (r.steps == 0) return;
  std::printf(
      "profile (rank %d, ms per step over %lld steps, %s): %s: %.0f samples/s at that pace\n", rank,
      static_cast<long long>(r.steps), r.device_events ? "CUDA events" : "wall clock",
      r.text().c_str(), static_cast<double>(samplesPerStep) * 1e3 / r.step_ms);
}

void printProgress(const Options& o, int epoch, size_t done, size_t of, float loss) {
  const int width = 30;
  int filled = static_cast<int>(width * done / of);
  std::printf("\repoch %d/%d [%s%s] %zu/%zu loss %.4f", epoch + 1, o.epochs,
              std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(), done, of,
              loss);
  std::fflush(stdout);
}

const char* precisionName(accel::MixedPrecision p) {
  return p == accel::MixedPrecision::Bf16   ? "bf16"
         : p == accel::MixedPrecision::Fp16 ? "fp16"
                                            : "fp32";
}

// Per-rank batch: --global_batch split over the ranks (it must divide), else --batch.
int64_t rankBatch(const Options& o, const accel::Accelerator& acc) {
  if (o.global_batch == 0) return o.batch;
  if (o.global_batch % acc.numProcesses() != 0) {
    throw accel::Error("--global_batch " + std::to_string(o.global_batch) +
                       " does not split evenly over " + std::to_string(acc.numProcesses()) +
                       " processes");
  }
  return o.global_batch / acc.numProcesses();
}

// --checkpoint_dir: the job's last checkpoint, replaced whole (saveState) every
// --checkpoint_every optimizer steps; rank 0 says so, which is how a watcher follows the job.
// Only after the batch that ended a step: with gradient accumulation the batches inside a window
// leave the step count as it was, and would save the same step again.
void checkpointIfDue(const Options& o, accel::Accelerator& acc) {
  if (o.checkpoint_dir.empty() || !acc.syncGradients() ||
      acc.stepCount() % o.checkpoint_every != 0) {
    return;
  }
  acc.saveState(o.checkpoint_dir + "/latest");
  acc.print("checkpoint at step " + std::to_string(acc.stepCount()) + " on " +
            std::to_string(acc.numProcesses()) + " processes");
}

// One epoch's order of samples on the device, batch after batch: copied once per epoch, so no
// step waits for a copy from the host (a copy from pageable memory holds the host until the
// device has done all the work before it, and the device then idles while the host launches
// the step). offsets[i] is batch i's first position.
struct EpochOrder {
  torch::Tensor samples;
  std::vector<int64_t> offsets;
  torch::Tensor batch(size_t i) const {
    return samples.narrow(0, offsets[i], offsets[i + 1] - offsets[i]);
  }
};

EpochOrder epochOrder(const std::vector<std::vector<size_t>>& batches,
                      const accel::Accelerator& acc) {
  EpochOrder order;
  std::vector<int64_t> all;
  order.offsets.push_back(0);
  for (const auto& batch : batches) {
    all.insert(all.end(), batch.begin(), batch.end());
    order.offsets.push_back(static_cast<int64_t>(all.size()));
  }
  order.samples = acc.toDevice(torch::tensor(all));
  return order;
}

// One batch: forward, backward, and (on sync steps) the optimizer step; each phase marked in
// `profile` when given.
template <typename Model>
torch::Tensor trainBatch(Model& model, accel::Accelerator& acc, const torch::Tensor& trainX,
                         const torch::Tensor& trainY, const torch::Tensor& idx, bool lastOfEpoch,
                         bool barrierOnly, accel::StepProfile* profile) {
  if (profile) profile->beginStep();
  auto x = normalise(trainX.index_select(0, idx)), y = trainY.index_select(0, idx);
  acc.accumulate(lastOfEpoch);
  if (profile) profile->mark(accel::StepPhase::Data);
  torch::Tensor logits;
  {
    auto cast = acc.autocast();
    logits = model->forward(x);
  }
  auto loss = torch::cross_entropy_loss(logits.to(torch::kFloat), y);
  if (profile) profile->mark(accel::StepPhase::Forward);
  if (barrierOnly) {
    {
      auto noSync = acc.noSync();
      acc.backward(loss);
    }
    acc.waitForEveryone();
  } else {
    acc.backward(loss);
  }
  acc.step();
  return loss.detach();
}

// The epochs (or up to optimizer step o.max_steps of the job) over this rank's shard of the
// training set, from where the loaded checkpoint left off: its step count times the batches per
// step is the position in the job's sequence of batches (exact while no epoch ends inside an
// accumulation window).
template <typename Model>
TrainStats train(Model& model, const Options& o, accel::Accelerator& acc,
                 const torch::Tensor& trainX, const torch::Tensor& trainY, Clock::time_point start,
                 accel::StepProfile* profile) {
  accel::ShardOptions shard;
  shard.dataset_size = static_cast<size_t>(trainX.size(0));
  shard.batch_size = static_cast<size_t>(rankBatch(o, acc));
  shard.shuffle = o.shuffle;
  shard.seed = o.seed;
  accel::ShardedBatchSampler sampler(shard, acc.processIndex(), acc.numProcesses());
  const auto perEpoch = static_cast<int64_t>(sampler.size());
  const int64_t resumeAt = acc.stepCount() * acc.gradientAccumulationSteps();
  const auto finished = [&] { return o.max_steps != 0 && acc.stepCount() >= o.max_steps; };
  TrainStats stats;
  for (auto epoch = static_cast<int>(resumeAt / perEpoch); epoch < o.epochs && !finished();
       ++epoch) {
    model->train();
    sampler.setEpoch(static_cast<uint64_t>(epoch));
    const auto batches = sampler.batches();
    const EpochOrder order = epochOrder(batches, acc);
    size_t i = epoch == resumeAt / perEpoch ? static_cast<size_t>(resumeAt % perEpoch) : 0;
    for (; i < batches.size() && !finished(); ++i) {
      stats.last_loss = trainBatch(model, acc, trainX, trainY, order.batch(i),
                                   i + 1 == batches.size(), o.barrier_only, profile);
      ++stats.steps;
      if (stats.first_step_s < 0) {
        stats.first_step_s = std::chrono::duration<double>(Clock::now() - start).count();
        if (acc.isMainProcess()) stats.first_loss = stats.last_loss.item<float>();
      }
      checkpointIfDue(o, acc);
      if (o.progress && acc.isMainProcess() && (stats.steps % 20 == 0 || i + 1 == batches.size())) {
        printProgress(o, epoch, i + 1, batches.size(), stats.last_loss.item<float>());
      }
    }
    if (o.progress && acc.isMainProcess()) std::printf("\n");
  }
  return stats;
}

// Where the run starts: the job's last checkpoint under --checkpoint_dir when there is one (a
// later round of an elastic job), else --load_state when given, else step 0.
void resume(const Options& o, accel::Accelerator& acc) {
  std::string from = o.load_state;
  if (!o.checkpoint_dir.empty() && std::filesystem::exists(o.checkpoint_dir + "/latest")) {
    from = o.checkpoint_dir + "/latest";
  }
  if (from.empty()) return;
  acc.loadState(from);
  acc.print("resumed from " + from + " at step " + std::to_string(acc.stepCount()) + " on " +
            std::to_string(acc.numProcesses()) + " processes");
}

template <typename Model>
int run(Model model, const Options& o, accel::Accelerator& acc) {
  const auto start = Clock::now();
  auto trainX = loadImages(o.data + "/train-images-idx3-ubyte.gz");
  auto trainY = accel::readIdx(o.data + "/train-labels-idx1-ubyte.gz").to(torch::kLong);
  auto testX = loadImages(o.data + "/t10k-images-idx3-ubyte.gz");
  auto testY = accel::readIdx(o.data + "/t10k-labels-idx1-ubyte.gz").to(torch::kLong);

  // The data set moves to the device once (uint8: 55 MB); batches are gathered there.
  trainX = acc.device().is_cuda() ? normalise(acc.toDevice(trainX)) : trainX;
  trainY = acc.toDevice(trainY);
  testX = acc.toDevice(testX);
  testY = acc.toDevice(testY);
  auto optimizer = makeOptimizer(model, o);
  acc.prepare(*model, *optimizer);
  resume(o, acc);

  // The first step (allocations, kernel loading, the communicator's first use) is not in the
  // profile.
  std::optional<accel::StepProfile> profile;
  if (o.profile) {
    profile.emplace(acc.device(), 1);
    acc.profileSteps(&*profile);
  }
  const TrainingPeak peak;
  auto trainStart = Clock::now();
  const TrainStats stats =
      train(model, o, acc, trainX, trainY, start, profile ? &*profile : nullptr);
  acc.waitForEveryone();
  const double trainSeconds = std::chrono::duration<double>(Clock::now() - trainStart).count();
  const std::string trainingPeak = peak.describe();
  if (!o.save_state.empty()) acc.saveState(o.save_state);

  int64_t correct = 0, total = 0;
  if (o.evaluate) std::tie(correct, total) = evaluate(model, acc, testX, testY);
  const double samplesPerSecond =
      static_cast<double>(stats.steps * rankBatch(o, acc) * acc.numProcesses()) / trainSeconds;
  // The last step's loss averaged over the ranks: with --global_batch, the loss of the same
  // samples on any number of processes.
  const float finalLoss =
      stats.steps == 0 ? 0.0f : acc.reduce(stats.last_loss, accel::Reduction::Mean).item<float>();
  char line[512];
  std::snprintf(line, sizeof line,
                "model %s, %d processes (%s), %s: %lld steps (job step %lld), first loss %.4f, "
                "final loss %.6f, test accuracy %.2f%% (%lld/%lld), "
                "%.0f samples/s, first step after %.2f s, on %s%s%s",
                o.model.c_str(), acc.numProcesses(), acc.communicator().backend(),
                precisionName(acc.mixedPrecision()), static_cast<long long>(stats.steps),
                static_cast<long long>(acc.stepCount()), stats.first_loss, finalLoss,
                100.0 * static_cast<double>(correct) / static_cast<double>(total),
                static_cast<long long>(correct), static_cast<long long>(total), samplesPerSecond,
                stats.first_step_s, acc.device().str().c_str(),
                o.barrier_only ? " (--barrier_only: gradients not averaged)" : "",
                trainingPeak.c_str());
  acc.print(line);
  if (profile) printProfile(*profile, acc.processIndex(), rankBatch(o, acc) * acc.numProcesses());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Fashion-MNIST on libaccel (run under `accel launch`)"};
  app.add_option("--data", o.data, "Directory with the four idx files (.gz)");
  app.add_option("--model", o.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--epochs", o.epochs, "Epochs")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.max_steps,
                 "Stop at this optimizer step of the job, counting a resumed checkpoint's "
                 "(0: whole epochs)");
  app.add_option("--batch", o.batch, "Batch size per rank")->check(CLI::PositiveNumber);
  app.add_option("--global_batch", o.global_batch,
                 "Batch size of a step over all ranks, split evenly (instead of --batch)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--shuffle,!--no-shuffle", o.shuffle,
               "Shuffle each epoch (off: file order, batch i to rank i mod N)");
  app.add_option("--seed", o.seed, "Seed, set before the model is built");
  app.add_option("--mixed_precision,--mixed-precision", o.mixed_precision,
                 "no, bf16, or fp16 (on a GPU) (default: from accel launch)")
      ->check(CLI::IsMember({"no", "bf16", "fp16"}));
  app.add_option("--device", o.device,
                 "auto (a GPU when one is visible: cuda:LOCAL_RANK), cpu, or cuda (an error "
                 "without one)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_flag("--progress,!--no-progress", o.progress, "Progress bar on rank 0");
  app.add_flag("--eval,!--no-eval", o.evaluate, "Measure test accuracy after training");
  app.add_flag("--profile", o.profile,
               "Each rank prints where a step's time went (data, forward, backward, waiting for "
               "the gradients' all-reduces, optimizer), averaged over the steps after the first: "
               "the device's time from CUDA events on a GPU, else the wall clock");
  app.add_flag("--no-foreach", o.no_foreach,
               "Step Adam with LibTorch's per-parameter loop, also on a GPU (default there: "
               "libaccel's multi-tensor step)");
  app.add_flag("--barrier_only", o.barrier_only,
               "Benchmark reference, not training: gradients are not averaged (each rank trains "
               "its own copy); the ranks only meet at one barrier per step");
  app.add_option("--save_state", o.save_state, "Save a checkpoint here after training");
  app.add_option("--load_state", o.load_state, "Resume from this checkpoint");
  app.add_option("--checkpoint_dir", o.checkpoint_dir,
                 "Keep the job's last checkpoint in DIR/latest and resume from it at start "
                 "(every round of an elastic job)");
  app.add_option("--checkpoint_every", o.checkpoint_every,
                 "Optimizer steps between checkpoints (with --checkpoint_dir)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  keepFreedMemoryForReuse();
  try {
    accel::AcceleratorOptions options;
    if (o.mixed_precision == "bf16") options.mixed_precision = accel::MixedPrecision::Bf16;
    if (o.mixed_precision == "fp16") options.mixed_precision = accel::MixedPrecision::Fp16;
    if (o.mixed_precision == "no") options.mixed_precision = accel::MixedPrecision::No;
    if (o.device != "auto") options.cpu = o.device == "cpu";
    if (o.no_foreach) options.foreach_optimizer = false;
    accel::Accelerator acc(options);
    if (o.device == "cuda" && !acc.device().is_cuda())
      throw accel::Error("--device cuda, but this process trains on the CPU: " + acc.whyCpu());
    acc.setSeed(o.seed);
    if (o.model == "mlp") return run(accel::examples::Mlp(), o, acc);
    return run(accel::examples::Cnn(), o, acc);
  } catch (const std::exception& e) {
    std::cerr << "fashion_mnist: " << e.what() << std::endl;
    return 1;
  }
}
