#include "libaccel/store/heartbeat.h"

#include <pthread.h>

#include <cstdlib>
#include <iostream>

#include "accel/error.h"
#include "libaccel/common/env_names.h"

namespace accel::store {
namespace {
constexpr std::chrono::milliseconds kMinInterval{100};
}  // namespace

std::unique_ptr<Heartbeat> Heartbeat::fromEnvironment() {
  const char* key = std::getenv(env::kHeartbeatKey);
  const char* addr = std::getenv(env::kMasterAddr);
  const char* port = std::getenv(env::kMasterPort);
  if (!key || !*key || !addr || !port) return nullptr;
  TcpStoreClientOptions options;
  options.host = addr;
  options.port = std::atoi(port);
  // Bounds what the destructor may wait for (the last steps to a store that stopped answering).
  options.connect_timeout = std::chrono::seconds(10);
  options.timeout = std::chrono::seconds(5);
  const char* work = std::getenv(env::kWorkKey);
  return std::make_unique<Heartbeat>(options, key, work ? work : "");
}

Heartbeat::Heartbeat(TcpStoreClientOptions options, std::string key, std::string workKey)
    : options_(std::move(options)),
      key_(std::move(key)),
      work_key_(std::move(workKey)),
      thread_([this] { run(); }) {
  ::pthread_setname_np(thread_.native_handle(), kThreadName);  // what `top -H` shows
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

// Wakes the sending thread only when it waits for steps: between two ADDs it sleeps out the
// interval, and a wake-up per step there would cost each rank a context switch per step (on a
// machine with a CPU per rank, one that preempts a rank, and in lock-step both).
void Heartbeat::beat(int64_t workMicros) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_work_ += workMicros > 0 ? workMicros : 0;
    wake = ++pending_ == 1 && idle_;
  }
  if (wake) wake_.notify_one();
}

// Sends each batch of counted steps as one ADD, after the batch's work (so that a step count the
// agent sees has its work already there); stops at the first error (after saying so).
void Heartbeat::run() {
  try {
    TcpStoreClient client(options_);
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      idle_ = true;
      wake_.wait(lock, [this] { return pending_ > 0 || stopping_; });
      idle_ = false;
      if (pending_ == 0) return;  // stopping, nothing left
      const int64_t steps = pending_;
      const int64_t work = pending_work_;
      pending_ = 0;
      pending_work_ = 0;
      lock.unlock();
      if (!work_key_.empty() && work > 0) client.add(work_key_, work);
      client.add(key_, steps);
      lock.lock();
      // At most one ADD per kMinInterval, whatever the step rate: the steps counted meanwhile
      // go together in the next one (the agent judges progress in seconds).
      wake_.wait_for(lock, kMinInterval, [this] { return stopping_; });
    }
  } catch (const std::exception& e) {
    std::cerr << "accel: heartbeat on " << key_ << " stopped: " << e.what() << "\n";
  }
}

}  // namespace accel::store
