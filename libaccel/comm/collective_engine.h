#pragma once
// CollectiveEngine: what libaccel's NCCL communicator decides, apart from the CUDA and NCCL calls
// that carry it out (a DeviceQueue: nccl_communicator.cc, a page of thin wrappers). It is
// compiled in every build, so the CPU build's unit tests run each decision against a fake queue
// (tests/libaccel/collective_engine_test.cc):
//   - which tensors a collective takes: on the communicator's device, contiguous, of a type NCCL
//     has — else accel::Error naming the operation and what to do;
//   - the order of the device calls of one collective: an event recorded on the caller's current
//     stream, the communicator's stream waiting for it, the collective on that stream, an event
//     recorded after it. Waiting for the result makes the caller's stream wait for that event:
//     the host does not wait and nothing synchronises the device, so gradient buckets all-reduce
//     while the rest of backward runs; only barrier() and synchronize() block the host;
//   - events come from a pool: one per collective in flight, none created in a steady state;
//   - the watchdog's rule: the oldest collective in flight (the communicator's stream runs them
//     in order) still not done `timeout` after it started, or NCCL reporting an asynchronous
//     error (a peer that failed), aborts the communicator; from then on every call and every
//     wait throws accel::Error naming that operation, its element count and type, and the
//     timeout. The watchdog's thread binds itself to the communicator's device first
//     (DeviceQueue::bindThread); it stops watching, without aborting, when the CUDA runtime is
//     unloading (the program is exiting: QueueUnloading);
//   - the types NCCL has not (bool, int16, complex, fp8) travel as bytes where a collective only
//     moves them (broadcast, all-gather); an all-reduce of bools is one of bytes with Sum as Max
//     (a logical or), as torch's.
// Thread-safety: every member may be called from any thread (autograd's hooks start bucket
// all-reduces on its device thread; the watchdog runs on its own thread); one mutex orders them,
// and every DeviceQueue call but abort() is made under it. abort() (ncclCommAbort, which waits
// for the device) runs once, after the mutex is released: the other calls throw meanwhile
// instead of waiting behind it.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "accel/communicator.h"
#include "accel/error.h"

namespace accel::comm {

enum class CollectiveKind { AllReduce, Broadcast, AllGather };

// One collective as NCCL takes it: `count` elements per rank.
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  at::ScalarType dtype = at::kFloat;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
};

// Thrown by a DeviceQueue call when the CUDA runtime is being unloaded (cudaErrorCudartUnloading:
// the program called exit() with the communicator alive): nothing is wrong with the collectives,
// and there is nothing left to watch or abort.
class QueueUnloading : public Error {
 public:
  using Error::Error;
};

// What NCCL says about the communicator or a call (ncclSuccess, ncclInProgress, an error).
struct QueueState {
  enum Kind { Ready, InProgress, Failed } kind = Ready;
  std::string error;  // with Failed: NCCL's words
};

// The device side of one communicator: its stream, its events (small integers, created by the
// queue on first use of an index) and its NCCL communicator. Every call returns at once; CUDA
// failures throw accel::Error.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // The first call on the watchdog's thread, before any other from it: the communicator's GPU
  // becomes that thread's current device (a new thread starts on device 0, where a context of
  // its own would cost every rank ~0.5 GB), and its event queries are allowed while another
  // thread captures a CUDA graph.
  virtual void bindThread() {}
  virtual void recordOnCaller(int event) = 0;  // on the calling thread's current stream
  virtual void queueWaits(int event) = 0;      // the communicator's stream waits for it
  virtual QueueState launch(const Collective& collective) = 0;  // on the communicator's stream
  virtual void recordOnQueue(int event) = 0;
  virtual void callerWaits(int event) = 0;  // the calling thread's current stream waits for it
  virtual bool done(int event) = 0;         // whether the work before the event completed
  // `tensor` is used on the communicator's stream: its memory is not reused before that ended.
  virtual void keepUntilDone(const at::Tensor& tensor) = 0;
  virtual QueueState state() = 0;  // ncclCommGetAsyncError
  // ncclCommAbort: in-flight collectives end, the queue is dead. Called once, without the
  // engine's mutex; may block until the device lets go.
  virtual void abort() = 0;
};

struct EngineOptions {
  at::Device device{at::kCPU};  // where tensors must live (a fake queue in tests: the CPU)
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds poll_interval{50};  // the watchdog's period
  bool watchdog_thread = true;                  // tests drive check() themselves
  std::function<std::chrono::steady_clock::time_point()> now = std::chrono::steady_clock::now;
};

class CollectiveEngine {
 public:
  CollectiveEngine(std::unique_ptr<DeviceQueue> queue, EngineOptions options);
  ~CollectiveEngine();  // stops the watchdog; does not wait for collectives in flight
  CollectiveEngine(const CollectiveEngine&) = delete;
  CollectiveEngine& operator=(const CollectiveEngine&) = delete;

  // Throws accel::Error when `tensor` cannot go to NCCL (see above); `op` names the call.
  // `asBytes`: the collective only moves the values (any type goes, as bytes).
  void checkTensor(const char* op, const at::Tensor& tensor, bool asBytes = false) const;

  // Starts `collective` after the caller's work so far; `tensors` are the memory it uses.
  // Returns its sequence number. Throws when the communicator was aborted, or when NCCL failed
  // or did not take the call within the timeout (then it aborts).
  uint64_t start(const char* op, const Collective& collective,
                 const std::vector<at::Tensor>& tensors);
  // The caller's stream waits for collective `seq` (nothing when it completed). Throws when the
  // communicator was aborted.
  void orderCaller(uint64_t seq);
  // Blocks the host until every collective started so far completed; throws when the watchdog
  // aborted (at most about `timeout` after the oldest started).
  void synchronize();
  // One pass of the watchdog at time `now`: retires completed collectives, applies the rule.
  void check(std::chrono::steady_clock::time_point now);

  // Polls `poll` until NCCL leaves ncclInProgress; after `timeout` calls `abort` and throws
  // accel::Error "<what> did not complete within T ms"; a failure throws naming `what`. (Joining
  // a communicator; a collective's launch is polled by start() itself.)
  static void awaitReady(const std::function<QueueState()>& poll,
                         const std::function<void()>& abort, const std::string& what,
                         const EngineOptions& options);

  size_t eventsCreated() const;  // for tests: the pool's size
  size_t inFlight() const;
  std::string abortReason() const;  // "" while healthy

 private:
  struct InFlight {
    uint64_t seq;
    std::string what;  // "all-reduce of 1024 float elements"
    int event;
    std::chrono::steady_clock::time_point started;
  };
  int takeEvent();
  void retireLocked();
  bool checkLocked(std::chrono::steady_clock::time_point now);
  bool markAbortedLocked(const std::string& reason);
  void abortQueue(std::unique_lock<std::mutex>& lock);
  void awaitLaunch(std::unique_lock<std::mutex>& lock, const std::string& what, QueueState state);
  void throwIfAbortedLocked() const;
  void watchdogLoop();

  std::unique_ptr<DeviceQueue> queue_;
  EngineOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  std::vector<int> free_events_;
  int next_event_ = 1;  // event 0 is the caller's, recorded anew for every collective
  uint64_t next_seq_ = 1;
  uint64_t completed_ = 0;  // every collective up to this one completed
  std::string aborted_;
  bool launching_ = false;  // a launch is in progress: no other NCCL call may enter the comm
  bool unloading_ = false;  // the CUDA runtime is going: nothing more to watch
  bool stopping_ = false;
  std::thread watchdog_;
};

// The collective NCCL is asked for to do `kind` on `in` (into `recv`): its own type, or bytes for
// a type NCCL has not (a moved tensor: nbytes of ncclUint8; an all-reduced bool: one byte each,
// Sum as Max: a logical or).
Collective collectiveOf(CollectiveKind kind, const at::Tensor& in, void* recv, ReduceOp op = {},
                        int root = 0);

// The store key of the NCCL unique id of this process's next communicator: one per
// communicator, numbered in the order they are built — the same on every rank — so that a job
// that builds a second Accelerator never reads the first one's id.
std::string nextNcclUniqueIdKey();

// A Communicator over a CollectiveEngine (the NCCL communicator, or a fake queue in tests).
// CUDA semantics, as torch's collectives on CUDA tensors: allreduceAsync returns at once and
// Work::wait() orders the caller's stream after the all-reduce; broadcast, allgather and
// allreduce return once the result is ordered before the caller's later work (reading it on the
// host, .item() or .cpu(), waits for it); barrier() and synchronize() block the host.
std::unique_ptr<Communicator> makeEngineCommunicator(std::unique_ptr<DeviceQueue> queue, int rank,
                                                     int size, EngineOptions options);

}  // namespace accel::comm
