#include "libaccel/comm/collective_engine.h"

#include <c10/core/ScalarType.h>

#include "accel/error.h"

namespace accel::comm {
namespace {

bool ncclHasType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kByte:
    case at::kChar:
      return true;
    default:
      return false;
  }
}

// "all-reduce of 1024 Float elements": what the caller asked for, in its words.
std::string describe(const char* op, const Collective& c) {
  return std::string(op) + " of " + std::to_string(c.count) + " " + c10::toString(c.dtype) +
         (c.count == 1 ? " element" : " elements");
}

std::string timeoutText(std::chrono::milliseconds timeout) {
  return std::to_string(timeout.count()) + " ms";
}

}  // namespace

CollectiveEngine::CollectiveEngine(std::unique_ptr<DeviceQueue> queue, EngineOptions options)
    : queue_(std::move(queue)), options_(std::move(options)) {
  if (options_.watchdog_thread) watchdog_ = std::thread([this] { watchdogLoop(); });
}

CollectiveEngine::~CollectiveEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void CollectiveEngine::checkTensor(const char* op, const at::Tensor& tensor) const {
  if (tensor.device() != options_.device) {
    throw Error(std::string("NCCL ") + op + ": the tensor is on " + tensor.device().str() +
                "; this communicator takes tensors on " + options_.device.str() +
                " (move it there first, e.g. with Accelerator::toDevice)");
  }
  if (!tensor.is_contiguous())
    throw Error(std::string("NCCL ") + op + " needs a contiguous tensor (call .contiguous())");
  if (!ncclHasType(tensor.scalar_type())) {
    throw Error(std::string("NCCL ") + op + ": NCCL has no " + c10::toString(tensor.scalar_type()) +
                " type");
  }
}

int CollectiveEngine::takeEvent() {
  if (free_events_.empty()) return next_event_++;
  const int event = free_events_.back();
  free_events_.pop_back();
  return event;
}

uint64_t CollectiveEngine::start(const char* op, const Collective& collective,
                                 const std::vector<at::Tensor>& tensors) {
  std::unique_lock<std::mutex> lock(mutex_);
  throwIfAbortedLocked();
  queue_->recordOnCaller(0);
  queue_->queueWaits(0);
  const QueueState launched = queue_->launch(collective);
  if (launched.kind != QueueState::Ready) {
    // Non-blocking NCCL: the call may still be in progress; nothing else may be called on the
    // communicator until it is not. Bounded by the timeout.
    lock.unlock();
    const QueueState first = launched;
    bool returnedFirst = false;
    awaitReady(
        [&] {
          if (!returnedFirst) {
            returnedFirst = true;
            return first;
          }
          return queue_->state();
        },
        [&] {
          std::lock_guard<std::mutex> relock(mutex_);
          abortLocked("NCCL " + describe(op, collective) + " was not taken within " +
                      timeoutText(options_.timeout) + "; the communicator was aborted");
        },
        "NCCL " + describe(op, collective), options_);
    lock.lock();
    throwIfAbortedLocked();
  }
  const int event = takeEvent();
  queue_->recordOnQueue(event);
  for (const auto& t : tensors) queue_->keepUntilDone(t);
  const uint64_t seq = next_seq_++;
  in_flight_.push_back({seq, describe(op, collective), event, options_.now()});
  return seq;
}

void CollectiveEngine::orderCaller(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  throwIfAbortedLocked();
  if (seq <= completed_) return;
  const InFlight& entry = in_flight_.at(seq - in_flight_.front().seq);
  queue_->callerWaits(entry.event);
}

void CollectiveEngine::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t last = next_seq_ - 1;
  while (completed_ < last) {
    throwIfAbortedLocked();
    retireLocked();
    if (completed_ >= last) break;
    // The watchdog (or, without its thread, this loop) applies the timeout.
    if (!options_.watchdog_thread) {
      lock.unlock();
      check(options_.now());
      lock.lock();
    }
    wake_.wait_for(lock, std::chrono::microseconds(200));
  }
  throwIfAbortedLocked();
}

// Collectives complete in the order the communicator's stream runs them.
void CollectiveEngine::retireLocked() {
  while (!in_flight_.empty() && aborted_.empty() && queue_->done(in_flight_.front().event)) {
    completed_ = in_flight_.front().seq;
    free_events_.push_back(in_flight_.front().event);
    in_flight_.pop_front();
  }
}

void CollectiveEngine::check(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.empty()) return;
  QueueState state;
  try {
    retireLocked();
    state = queue_->state();
  } catch (const std::exception& e) {  // a CUDA error: the device is no longer usable
    abortLocked(std::string("checking the collectives in flight failed: ") + e.what() +
                "; the communicator was aborted");
    return;
  }
  if (state.kind == QueueState::Failed) {
    abortLocked("NCCL reported an error" +
                (in_flight_.empty() ? std::string()
                                    : " while the " + in_flight_.front().what + " was in flight") +
                ": " + state.error + " (a peer failed?); the communicator was aborted");
    return;
  }
  if (!in_flight_.empty() && now - in_flight_.front().started > options_.timeout) {
    abortLocked("NCCL " + in_flight_.front().what + " did not complete within " +
                timeoutText(options_.timeout) +
                " (a peer died or stopped calling collectives); the communicator was aborted");
  }
}

void CollectiveEngine::abortLocked(const std::string& reason) {
  if (!aborted_.empty()) return;
  aborted_ = reason;
  queue_->abort();
  wake_.notify_all();
}

void CollectiveEngine::throwIfAbortedLocked() const {
  if (!aborted_.empty()) throw Error(aborted_);
}

void CollectiveEngine::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.poll_interval);
    if (stopping_) break;
    lock.unlock();
    check(options_.now());
    lock.lock();
  }
}

void CollectiveEngine::awaitReady(const std::function<QueueState()>& poll,
                                  const std::function<void()>& abort, const std::string& what,
                                  const EngineOptions& options) {
  const auto deadline = options.now() + options.timeout;
  for (;;) {
    const QueueState state = poll();
    if (state.kind == QueueState::Ready) return;
    if (state.kind == QueueState::Failed) {
      abort();
      throw Error(what + " failed: " + state.error);
    }
    if (options.now() > deadline) {
      abort();
      throw Error(what + " did not complete within " + timeoutText(options.timeout) +
                  " (a peer did not start, or cannot be reached); aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

size_t CollectiveEngine::eventsCreated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(next_event_);
}

std::string CollectiveEngine::abortReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

size_t CollectiveEngine::inFlight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.size();
}

namespace {

class EngineWork : public Work {
 public:
  EngineWork(CollectiveEngine& engine, uint64_t seq) : engine_(engine), seq_(seq) {}
  void wait() override { engine_.orderCaller(seq_); }

 private:
  CollectiveEngine& engine_;
  uint64_t seq_;
};

class EngineCommunicator : public Communicator {
 public:
  EngineCommunicator(std::unique_ptr<DeviceQueue> queue, int rank, int size, EngineOptions options)
      : device_(options.device),
        engine_(std::move(queue), std::move(options)),
        rank_(rank),
        size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  at::Device device() const override { return device_; }

  std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) override {
    engine_.checkTensor("all-reduce", tensor);
    Collective c{CollectiveKind::AllReduce,
                 tensor.data_ptr(),
                 tensor.data_ptr(),
                 static_cast<size_t>(tensor.numel()),
                 tensor.scalar_type(),
                 op,
                 0};
    return std::make_unique<EngineWork>(engine_, engine_.start("all-reduce", c, {tensor}));
  }

  void broadcast(at::Tensor& tensor, int root) override {
    engine_.checkTensor("broadcast", tensor);
    ACCEL_CHECK(root >= 0 && root < size_, "broadcast from rank ", root, " of ", size_);
    Collective c{CollectiveKind::Broadcast,
                 tensor.data_ptr(),
                 tensor.data_ptr(),
                 static_cast<size_t>(tensor.numel()),
                 tensor.scalar_type(),
                 ReduceOp::Sum,
                 root};
    engine_.orderCaller(engine_.start("broadcast", c, {tensor}));
  }

  // One output allocation (the caller's allocator, on its stream); the parts are views of it.
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    engine_.checkTensor("all-gather", tensor.is_contiguous() ? tensor : tensor.contiguous());
    at::Tensor in = tensor.contiguous();
    at::Tensor out = at::empty({size_ * in.numel()}, in.options());
    Collective c{CollectiveKind::AllGather,
                 in.data_ptr(),
                 out.data_ptr(),
                 static_cast<size_t>(in.numel()),
                 in.scalar_type(),
                 ReduceOp::Sum,
                 0};
    engine_.orderCaller(engine_.start("all-gather", c, {in, out}));
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size_; ++r)
      parts.push_back(out.narrow(0, r * in.numel(), in.numel()).view(in.sizes()));
    return parts;
  }

  void barrier() override {
    if (!barrier_.defined()) barrier_ = at::zeros({1}, at::TensorOptions().device(device_));
    Collective c{CollectiveKind::AllReduce,
                 barrier_.data_ptr(),
                 barrier_.data_ptr(),
                 1,
                 barrier_.scalar_type(),
                 ReduceOp::Sum,
                 0};
    engine_.start("barrier", c, {barrier_});
    engine_.synchronize();
  }

  void synchronize() override { engine_.synchronize(); }

 private:
  at::Device device_;
  CollectiveEngine engine_;
  int rank_;
  int size_;
  at::Tensor barrier_;  // allocated by the first barrier(), then reused
};

}  // namespace

std::unique_ptr<Communicator> makeEngineCommunicator(std::unique_ptr<DeviceQueue> queue, int rank,
                                                     int size, EngineOptions options) {
  return std::make_unique<EngineCommunicator>(std::move(queue), rank, size, std::move(options));
}

}  // namespace accel::comm
