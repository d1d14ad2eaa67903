#pragma once
// OpQueue: a communicator's operations, run one at a time in the order they were started on a
// thread of its own (collectives are matched by order), so that an asynchronous all-reduce
// returns at once. Used by the shared-memory and hierarchical communicators.
//
// Thread-safety: one thread submits (the communicator's caller, as every Communicator is
// single-caller); the queue's own thread runs. The destructor finishes what was queued.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "accel/communicator.h"

namespace accel::comm {

// The outcome of one queued operation.
struct Outcome {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
};

class OutcomeWork : public Work {
 public:
  explicit OutcomeWork(std::shared_ptr<Outcome> outcome) : outcome_(std::move(outcome)) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(outcome_->m);
    outcome_->cv.wait(lock, [&] { return outcome_->done; });
    if (outcome_->error) std::rethrow_exception(outcome_->error);
  }

 private:
  std::shared_ptr<Outcome> outcome_;
};

// Runs operations one at a time, in the order submitted, on its own thread (the group's
// collectives are matched by order). The destructor finishes what was queued.
class OpQueue {
 public:
  OpQueue() : thread_([this] { run(); }) {}
  ~OpQueue() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // Whether nothing is queued or running. Only the submitting thread makes it false again, so
  // that thread may run an operation itself while this holds: the order is kept.
  bool idle() {
    std::lock_guard<std::mutex> lock(m_);
    return ops_.empty() && !running_;
  }

  // Queues `op`; its Work's wait() blocks until it ran and rethrows what it threw.
  std::unique_ptr<Work> start(std::function<void()> op) {
    return std::make_unique<OutcomeWork>(submit(std::move(op)));
  }

  // Runs `op` and returns when it did: on the caller's thread when nothing is in flight (no
  // hand-off to the queue's thread and back), else queued behind what is.
  void runBlocking(std::function<void()> op) {
    if (idle()) return op();
    OutcomeWork(submit(std::move(op))).wait();
  }

  std::shared_ptr<Outcome> submit(std::function<void()> op) {
    auto outcome = std::make_shared<Outcome>();
    {
      std::lock_guard<std::mutex> lock(m_);
      ops_.emplace_back(std::move(op), outcome);
    }
    cv_.notify_one();
    return outcome;
  }

 private:
  void run() {
    for (;;) {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return stop_ || !ops_.empty(); });
      if (ops_.empty()) return;
      auto [op, outcome] = std::move(ops_.front());
      ops_.pop_front();
      running_ = true;
      lock.unlock();
      std::exception_ptr error;
      try {
        op();
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> done(outcome->m);
        outcome->done = true;
        outcome->error = error;
        outcome->cv.notify_all();
      }
      std::lock_guard<std::mutex> relock(m_);
      running_ = false;
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Outcome>>> ops_;
  bool stop_ = false;
  bool running_ = false;
  std::thread thread_;  // last: started once the rest is constructed
};

}  // namespace accel::comm
