#pragma once
// SimWorld: the agents of a job as threads in simulated time, meeting through one in-memory
// store, for the rendezvous's rules (agent_rendezvous.h, round_end.h) with the exact instants
// of what every agent does.
//
// Time moves only when every agent is blocked — in a store wait or a pause — and then straight
// to the earliest deadline among them; any write to the store wakes every blocked agent to look
// again. So a test of 900 s of rendezvous takes milliseconds, and what an agent sees at an
// instant does not depend on how the machine schedules threads.
//
// An agent reaches the store through a SimClient (one per agent, as a TCP client is), which can
// be cut at an instant: from then on every call fails as a closed connection does, and the
// agent's presence (what the master's GroupSettings::present asks) is gone — a machine whose
// agent died.

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "accel/error.h"
#include "launcher/base/clock.h"
#include "libaccel/store/memory_store.h"

namespace accel::launcher::testing {

class SimWorld : public Clock {
 public:
  // The instant the world starts at; at(ms) is `ms` after it.
  static time_point origin() { return time_point{} + std::chrono::hours(1); }
  static time_point at(std::chrono::milliseconds ms) { return origin() + ms; }

  time_point now() const override {
    std::lock_guard lock(mutex_);
    return now_;
  }
  // Milliseconds since origin(), for assertions.
  int64_t nowMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now() - origin()).count();
  }
  // Descriptors are not simulated (the link's tests use a StepClock over real sockets).
  int wait(int, epoll_event*, int, time_point) override {
    errno = ENOSYS;
    return -1;
  }
  void sleepUntil(time_point deadline) override {
    std::unique_lock lock(mutex_);
    block(lock, deadline, [] { return false; });
  }

  // Runs each body on a thread of its own, every one an agent of the world; returns when all
  // returned (rethrowing the first exception one threw).
  void run(std::vector<std::function<void()>> bodies) {
    {
      std::lock_guard lock(mutex_);
      participants_ += static_cast<int>(bodies.size());
      running_ += static_cast<int>(bodies.size());
    }
    std::vector<std::exception_ptr> errors(bodies.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < bodies.size(); ++i) {
      threads.emplace_back([this, &bodies, &errors, i] {
        try {
          bodies[i]();
        } catch (...) {
          errors[i] = std::current_exception();
        }
        std::lock_guard lock(mutex_);
        --participants_;
        if (--running_ == 0) advance();
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  // With mutex() held by an agent: returns once ready() (asked again after every change) or
  // the time reached `deadline`; says whether ready().
  template <class Ready>
  bool block(std::unique_lock<std::mutex>& lock, time_point deadline, Ready ready) {
    while (true) {
      if (ready()) return true;
      if (now_ >= deadline) return false;
      const auto mine = deadlines_.insert(deadline);
      const uint64_t seen = generation_;
      if (--running_ == 0) advance();
      changed_.wait(lock, [&] { return generation_ != seen; });
      deadlines_.erase(mine);
    }
  }
  // With mutex() held: something changed that blocked agents may wait for.
  void changed() {
    ++generation_;
    running_ = participants_;  // each looks again, and counts as running until it blocks again
    changed_.notify_all();
  }
  std::mutex& mutex() const { return mutex_; }
  time_point nowLocked() const { return now_; }

 private:
  // Every agent is blocked: the time moves to the earliest deadline.
  void advance() {
    if (participants_ == 0) return;
    const time_point next = *deadlines_.begin();
    if (next == time_point::max() || next - origin() > std::chrono::hours(24)) {
      std::fprintf(stderr, "SimWorld: every agent waits and none has a deadline: a deadlock\n");
      std::abort();
    }
    now_ = std::max(now_, next);
    changed();
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  time_point now_ = origin();
  int participants_ = 0;
  int running_ = 0;  // agents not blocked (or woken and not yet blocked again)
  uint64_t generation_ = 0;
  std::multiset<time_point> deadlines_;
};

// The job's store: a MemoryStore's data and semantics, its blocking waits in the world's time.
class SimClient : public store::Store {
 public:
  SimClient(SimWorld& world, store::MemoryStore& data) : world_(world), data_(data) {}

  // From `t` on, every call fails as on a closed connection, and present() is false.
  void cutAt(Clock::time_point t) { cut_at_ = t; }
  bool present() const { return world_.now() < cut_at_; }

  void set(const std::string& key, const std::string& value) override {
    write([&] { data_.set(key, value); });
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    wait({key}, timeout);
    return data_.get(key, std::chrono::milliseconds(0));
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    write([&] { value = data_.add(key, delta); });
    return value;
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    std::string value;
    write([&] { value = data_.compareSet(key, expected, desired); });
    return value;
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(world_.mutex());
    failIfCut();
    const auto deadline = world_.nowLocked() + timeout;
    if (world_.block(lock, std::min(deadline, cut_at_), [&] { return data_.check(keys); })) return;
    failIfCut();
    throw TimeoutError("wait for " + keys.front() + " timed out after " +
                       std::to_string(timeout.count()) + " ms");
  }
  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(world_.mutex());
    failIfCut();
    return data_.check(keys);
  }
  bool deleteKey(const std::string& key) override {
    bool existed = false;
    write([&] { existed = data_.deleteKey(key); });
    return existed;
  }
  int64_t numKeys() override {
    std::lock_guard lock(world_.mutex());
    failIfCut();
    return data_.numKeys();
  }

 private:
  template <class F>
  void write(F f) {
    std::lock_guard lock(world_.mutex());
    failIfCut();
    f();
    world_.changed();
  }
  void failIfCut() const {
    if (world_.nowLocked() >= cut_at_) throw NetworkError("connection to the store closed");
  }

  SimWorld& world_;
  store::MemoryStore& data_;
  Clock::time_point cut_at_ = Clock::time_point::max();
};

}  // namespace accel::launcher::testing
