#pragma once
// accel::Accelerator: what accelerate's Accelerator gives Python users, for C++ training
// programs on LibTorch. It reads `accel launch`'s environment (RANK, WORLD_SIZE, MASTER_ADDR/
// PORT, ACCELERATE_MIXED_PRECISION, ACCELERATE_GRADIENT_ACCUMULATION_STEPS, ...), joins the
// agent's store and creates the communicator. Without a launcher it is a world of one with no
// networking. Options given in code win over the environment.
//
// Not thread-safe. Calls marked "collective" must be made by every rank in the same order; each
// blocks for at most options.timeout per collective and throws accel::Error when one fails.
//
//   accel::Accelerator acc;
//   acc.prepare(*model, optimizer);
//   for (auto& batch : batches) {
//     acc.accumulate(isLast);                  // syncs on every k-th step and the last batch
//     torch::Tensor loss;
//     { auto cast = acc.autocast(); loss = lossFn(model->forward(x), y); }
//     acc.backward(loss);                      // ÷k, loss scaling, averaged gradients
//     acc.step();                              // optimizer step, then .grad = None, on sync steps
//   }

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "accel/communicator.h"
#include "accel/data.h"
#include "accel/error.h"  // accel::Error and friends, thrown by every call
#include "accel/grad_scaler.h"
#include "accel/step_profile.h"

namespace accel {

namespace store {
class Heartbeat;
}
namespace sync {
class GradientSync;
}
namespace checkpoint {
class StagedDir;
}

enum class MixedPrecision { No, Bf16, Fp16 };
enum class Reduction { Sum, Mean };
// Gradient compression for the all-reduce: Bf16 is DDP's bf16_compress_hook (fp32 gradients
// travel as bfloat16, half the bytes, and are averaged back in fp32).
enum class GradientCompression { None, Bf16 };

struct AcceleratorOptions {
  std::optional<MixedPrecision> mixed_precision;  // else $ACCELERATE_MIXED_PRECISION, else no
  std::optional<int>
      gradient_accumulation_steps;  // else $ACCELERATE_GRADIENT_ACCUMULATION_STEPS, else 1
  std::optional<bool> cpu;          // else $ACCELERATE_USE_CPU ("True": train on the CPU)
  // How CPU ranks communicate (communicator.h); else $ACCEL_CPU_BACKEND, else Auto: shared
  // memory when every rank is on this machine, shared memory inside machines and Gloo between
  // them with several (comm/from_environment.h).
  std::optional<CpuBackend> cpu_backend;
  size_t bucket_cap_bytes = 25u << 20;
  bool find_unused_parameters = false;
  std::optional<GradientCompression>
      gradient_compression;  // else $ACCEL_GRADIENT_COMPRESSION (none, bf16)
  // DDP's gradient_as_bucket_view: each .grad a view of its all-reduce bucket from prepare() on,
  // so backward accumulates where the all-reduce reads, and step() zeroes it in place (.grad
  // stays defined, as zeros) rather than releasing it. Else $ACCEL_GRADIENT_AS_BUCKET_VIEW
  // ("0": off — gradients copied into the buckets, .grad released after step()), else on.
  std::optional<bool> gradient_as_bucket_view;
  GradScalerOptions scaler;
  // torch::optim::Adam and AdamW step with multi-tensor operations over all the parameters (a
  // few kernels per step instead of eight per parameter: Python's default on CUDA, foreach=True)
  // on their own state, so checkpoints are the same; other optimizers step as they do. Unset: on
  // a GPU. The arithmetic is LibTorch's (on the CPU bit for bit).
  std::optional<bool> foreach_optimizer;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // store and collectives
  // For tests: use this communicator instead of creating one from the environment.
  std::shared_ptr<Communicator> communicator;
  int local_rank = -1;  // with `communicator`: else $LOCAL_RANK
};

// Autocast scope (bf16 on CPU; bf16/fp16 on CUDA); restores the previous state on exit.
class AutocastGuard {
 public:
  AutocastGuard(bool enabled, at::ScalarType dtype, bool cuda);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  bool cuda_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

class Accelerator;

// Accelerator::noSync()'s scope; restores the state before it on exit.
class NoSyncGuard {
 public:
  explicit NoSyncGuard(Accelerator& acc);
  ~NoSyncGuard();
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  Accelerator& acc_;
  bool previous_;
};

class Accelerator {
 public:
  // Blocks while joining the process group (at most options.timeout). Throws accel::Error on a
  // bad environment or option (fp16 on the CPU, an unknown $ACCEL_GRADIENT_COMPRESSION, more
  // ranks on this machine than visible GPUs),
  // accel::NetworkError when the store or the peers cannot be reached.
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  int processIndex() const { return comm_->rank(); }
  int numProcesses() const { return comm_->size(); }
  int localProcessIndex() const { return local_rank_; }
  bool isMainProcess() const { return processIndex() == 0; }
  bool isLocalMainProcess() const { return local_rank_ == 0; }
  // cuda:LOCAL_RANK when a GPU is visible, the CPU was not asked for and the ranks can exchange
  // CUDA tensors (libaccel built with NCCL, or one process); else the CPU (comm/device_choice.h).
  // More ranks on a machine than visible GPUs is an error of the constructor.
  const torch::Device& device() const { return device_; }
  // With device() the CPU: why ("no CUDA device is visible to this LibTorch", "the CPU was asked
  // for (--cpu)", ...); "" on a GPU.
  const std::string& whyCpu() const { return why_cpu_; }
  // Moves a batch (or any tensor) to device(); returns it as is when it is there. From pinned
  // host memory the copy is asynchronous on the current stream; from pageable memory CUDA copies
  // before returning.
  at::Tensor toDevice(const at::Tensor& tensor) const {
    return tensor.to(device_, /*non_blocking=*/true);
  }
  MixedPrecision mixedPrecision() const { return mixed_precision_; }
  GradientCompression gradientCompression() const { return compression_; }
  int gradientAccumulationSteps() const { return accumulation_steps_; }
  Communicator& communicator() { return *comm_; }

  // Moves the model and the optimizer's state to the device, broadcasts its parameters and buffers
  // from rank 0 (a collective), and installs gradient synchronisation; registers the optimizer for
  // step/zero_grad/save_state. Call once, before training: throws accel::Error the second time.
  // The model and the optimizer must outlive the Accelerator's use of them.
  void prepare(torch::nn::Module& model, torch::optim::Optimizer& optimizer);

  // Starts a training step and returns whether its backward synchronises gradients: every k-th
  // step, and the last batch of the dataloader (`lastBatch`), after which counting restarts.
  bool accumulate(bool lastBatch = false);
  bool syncGradients() const { return sync_gradients_; }

  // accelerate's no_sync(model): backward() calls made while the returned guard lives leave each
  // rank's gradients its own — no all-reduce, no collective — while step() still steps on sync
  // steps. For gradient accumulation by hand, or to measure a step without the averaging (the
  // example's --barrier_only). Not a collective; guards nest.
  [[nodiscard]] NoSyncGuard noSync() { return NoSyncGuard(*this); }

  AutocastGuard autocast() const;

  // loss ÷ k, scaled for fp16, backward; on sync steps (a collective) the averaged gradients
  // are in .grad when it returns. Throws accel::Error for parameters that got no gradient
  // (unless find_unused_parameters).
  void backward(const at::Tensor& loss);

  // On sync steps: unscale (fp16: a collective), skip on inf/NaN, optimizer step, scaler
  // update, then every gradient reset to undefined (torch 2.x's zero_grad(set_to_none=True),
  // whatever the LibTorch). Returns whether the optimizer stepped. A no-op on accumulation steps.
  // Throws accel::Error before prepare().
  bool step();
  bool optimizerStepWasSkipped() const { return step_skipped_; }

  // Where the last backward() and step() spent their time (seconds, wall clock on the calling
  // thread), for a per-step breakdown (the example's --profile): measured on every step, a few
  // clock reads each.
  struct StepTimes {
    double backward = 0;   // autograd's backward, with the gradient hooks (bucket copies, and
                           // the buckets' all-reduces started as they fill)
    double sync = 0;       // waiting for the buckets' all-reduces, averages into .grad (0 on a
                           // step that does not synchronise, or with one process)
    double optimizer = 0;  // step(): unscale, the optimizer, the gradients reset (0 when it
                           // does not step: accumulation)
  };
  const StepTimes& lastStepTimes() const { return step_times_; }
  // From now on backward() marks StepPhase::Backward when autograd returns and Sync once the
  // averaged gradients are in place (sync steps with several processes), step() marks Optimizer
  // (when it steps); nullptr stops. `profile` must outlive its use here.
  void profileSteps(StepProfile* profile) { profile_ = profile; }
  GradScaler& scaler() { return scaler_; }

  // Unscales first (fp16: a collective), then clips the total norm of the prepared model's
  // gradients. Throws accel::Error before prepare().
  double clipGradNorm(double maxNorm, double normType = 2.0);

  // Collectives (each blocks until every rank called it).
  at::Tensor gather(const at::Tensor& tensor);  // concat on dim 0, rank order
  // gather() that drops the samples the sampler duplicated to even out the last batch: call it
  // on every batch with `lastBatch` set on the last one.
  at::Tensor gatherForMetrics(const at::Tensor& tensor, const ShardedBatchSampler& sampler,
                              bool lastBatch);
  at::Tensor reduce(const at::Tensor& tensor, Reduction reduction = Reduction::Sum);
  void broadcast(at::Tensor& tensor, int fromProcess = 0);
  at::Tensor padAcrossProcesses(const at::Tensor& tensor, int64_t dim = 0, double padIndex = 0,
                                bool padFirst = false);
  void waitForEveryone() { comm_->barrier(); }

  // Prints on the main process only (accelerate prints on the local main process).
  void print(const std::string& text) const;
  // Runs `fn` on the main process first, then on the others: a collective (two barriers), so
  // every rank must call it. The others start `fn` only once the main process's `fn` returned.
  // Should `fn` throw on the main process, the exception propagates there and the others wait
  // in the barrier until options.timeout, then throw accel::Error.
  void mainProcessFirst(const std::function<void()>& fn);
  std::pair<size_t, size_t> splitBetweenProcesses(size_t count) const {
    return accel::splitBetweenProcesses(count, processIndex(), numProcesses());
  }
  // Seeds torch (and the device) with `seed`, plus the rank when `deviceSpecific`.
  void setSeed(uint64_t seed, bool deviceSpecific = false);

  // Checkpoints: model.pt, optimizer.pt, scaler.json, accel_state.json (written by the main
  // process) and random_states_<rank>.pt (each rank's CPU generator), plus, training on CUDA,
  // cuda_random_states_<rank>.pt (its device's generator; restored only on CUDA).
  //
  // saveState: a collective (every rank calls it). Each rank creates the directories it
  // writes (no shared file system needed: a rank on another machine keeps its own files
  // under `dir`), writes into a temporary directory beside `dir` (`.NAME.tmp-*`), and once
  // every rank has written, the directory is swapped into place; an existing checkpoint there
  // is replaced only then, so a crash at any point leaves it whole. Every write is checked and
  // fsynced. Throws accel::Error naming the file (on every rank: those that did not fail name
  // the ranks that did) and leaves any previous checkpoint as it was; refuses to replace a
  // directory holding anything but checkpoint files. Blocks for the writes and the collectives
  // (at most options.timeout for each collective).
  //
  // loadState: a collective too. Every rank reads the files it needs (so without a shared file
  // system, copy the checkpoint to every machine, as with accelerate); a missing, torn or
  // unparsable file is an accel::Error naming it, on every rank, before any state changed
  // (a file that parses but does not fit the model or optimizer may leave them partly
  // loaded). Works on a different number of processes: ranks the saving job did not have keep
  // their RNG state.
  void saveState(const std::string& dir);
  void loadState(const std::string& dir);
  int64_t stepCount() const { return optimizer_steps_; }

 private:
  friend class NoSyncGuard;
  void applyGradientSyncState();  // hooks on when this step syncs and no noSync() lives, else off

  std::vector<at::Tensor> gradients() const;
  void clearGradients();
  void stepOptimizer();
  torch::Device chooseDevice(bool cpuOnly);
  at::Generator rngGenerator(size_t index) const;
  void writeOwnFiles(const checkpoint::StagedDir& staged) const;
  void loadOwnFiles(const std::string& dir);
  // Adds the time since `since` to the step's wait for the other ranks (not its own work).
  void countWait(std::chrono::steady_clock::time_point since);
  // The heartbeat of the step whose gradients are about to sync, with the rank's own work in the
  // step before it: its wall time less the waits countWait counted.
  void beat();

  AcceleratorOptions options_;
  std::shared_ptr<Communicator> comm_;
  int local_rank_ = 0;
  torch::Device device_{torch::kCPU};
  std::string why_cpu_;  // with device_ the CPU: why (device_choice.h)
  MixedPrecision mixed_precision_ = MixedPrecision::No;
  int accumulation_steps_ = 1;
  GradientCompression compression_ = GradientCompression::None;
  GradScaler scaler_;
  torch::nn::Module* model_ = nullptr;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::unique_ptr<sync::GradientSync> grad_sync_;
  std::unique_ptr<store::Heartbeat> heartbeat_;  // under accel launch: the progress heartbeat
  int64_t micro_step_ = 0;
  int64_t optimizer_steps_ = 0;
  bool sync_gradients_ = true;
  bool no_sync_ = false;  // a noSync() guard lives
  bool unscaled_ = false;
  StepTimes step_times_;
  std::chrono::steady_clock::time_point last_beat_{};  // none yet: the epoch
  std::chrono::steady_clock::duration waited_{};       // in collectives since last_beat_
  StepProfile* profile_ = nullptr;
  bool step_skipped_ = false;
  bool found_inf_ = false;
};

}  // namespace accel
