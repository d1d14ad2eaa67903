#pragma once
// SimWorld: the agents of a job as threads in simulated time, meeting through one in-memory
// store, for the rendezvous's rules (c10d/rendezvous.h, round_end.h) and whole groups
// (sim_group_store.h) with the exact instants of what every agent does.
//
// Time moves only when every thread of the world is blocked — in a store wait, a pause, or a wait
// for descriptors — and no descriptor one of them waits for is ready; then straight to the
// earliest deadline among them. Any write to the store wakes every blocked thread to look again.
// So a test of 900 s of rendezvous takes milliseconds, and what an agent sees at an instant does
// not depend on how the machine schedules threads. The world's threads are the bodies given to
// run() and the threads started through startThread() (a round link's) while they live; between
// two run()s the time stands still.
//
// An agent reaches the store through a SimClient (one per agent, as a TCP client is), which can
// be cut at an instant: from then on every call fails as a closed connection does, and the
// agent's presence (what the master's GroupSettings::present asks) is gone — a machine whose
// agent died.

#include <poll.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <list>
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
  // Waits for events on `epollFd` in the world's time: those ready now, else until one is or the
  // time reaches `deadline` (0 events). A descriptor written from any thread ends the wait
  // (looked at every millisecond of real time, and always before the time moves).
  int wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) override {
    std::unique_lock lock(mutex_);
    int n = 0;
    const auto ready = [&] { return (n = ::epoll_wait(epollFd, events, maxEvents, 0)) != 0; };
    return block(lock, deadline, ready, epollFd) ? n : 0;
  }
  void sleepUntil(time_point deadline) override {
    std::unique_lock lock(mutex_);
    block(lock, deadline, [] { return false; });
  }
  // A thread of the world from its start to its end (a round link's).
  std::thread startThread(std::function<void()> body) override {
    {
      std::lock_guard lock(mutex_);
      ++participants_, ++running_;
    }
    return std::thread([this, body = std::move(body)] {
      body();
      {
        std::lock_guard lock(mutex_);
        ended_.insert(std::this_thread::get_id());
        changed();  // a joiner looks before the time moves
      }
      leave();
    });
  }
  // Blocked (the time may move) until `thread`, one startThread() started, ended.
  void joinThread(std::thread& thread) override {
    const auto id = thread.get_id();
    {
      std::unique_lock lock(mutex_);
      block(lock, time_point::max(), [&] { return ended_.count(id) > 0; });
      ended_.erase(id);
    }
    thread.join();
  }
  // For a body: whether `fd` became readable by `deadline`.
  bool awaitReadable(int fd, time_point deadline) {
    std::unique_lock lock(mutex_);
    return block(
        lock, deadline, [fd] { return readable(fd); }, fd);
  }

  // Runs each body on a thread of its own, every one an agent of the world; returns when all
  // returned (rethrowing the first exception one threw).
  void run(std::vector<std::function<void()>> bodies) {
    {
      std::lock_guard lock(mutex_);
      participants_ += static_cast<int>(bodies.size());
      running_ += static_cast<int>(bodies.size());
      bodies_ += static_cast<int>(bodies.size());
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
        {
          std::lock_guard lock(mutex_);
          --bodies_;
        }
        leave();
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  // With mutex() held by a thread of the world: returns once ready() (asked again after every
  // change, and every millisecond while `fd` — one that ready() depends on — is not readable) or
  // the time reached `deadline`; says whether ready().
  template <class Ready>
  bool block(std::unique_lock<std::mutex>& lock, time_point deadline, Ready ready, int fd = -1) {
    while (true) {
      if (ready()) return true;
      if (now_ >= deadline) return false;
      const auto mine = deadlines_.insert(deadline);
      const auto watched = fds_.insert(fd);
      const uint64_t seen = generation_;
      if (--running_ == 0) advance();
      bool woken = false;  // by its descriptor, not by a change: it runs again
      if (fd < 0) {
        changed_.wait(lock, [&] { return generation_ != seen; });
      } else {
        while (generation_ == seen && !(woken = readable(fd))) {
          changed_.wait_for(lock, std::chrono::milliseconds(1));
        }
      }
      if (woken) ++running_;
      deadlines_.erase(mine);
      fds_.erase(watched);
    }
  }
  // With mutex() held: something changed that blocked agents may wait for. `hook`s (onChange)
  // look first.
  void changed() {
    for (auto it = hooks_.begin(); it != hooks_.end();) it = (*it)() ? hooks_.erase(it) : ++it;
    ++generation_;
    running_ = participants_;  // each looks again, and counts as running until it blocks again
    changed_.notify_all();
  }
  // With mutex() held: `hook` runs at every change (and now) until it returns true — a watch's.
  void onChange(std::function<bool()> hook) {
    if (!hook()) hooks_.push_back(std::move(hook));
  }
  std::mutex& mutex() const { return mutex_; }
  time_point nowLocked() const { return now_; }

 private:
  static bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  // A thread of the world ended.
  void leave() {
    std::lock_guard lock(mutex_);
    --participants_;
    if (--running_ == 0) advance();
  }
  // Every thread is blocked: those whose descriptor is ready look first; else the time moves to
  // the earliest deadline (not between run()s).
  void advance() {
    if (participants_ == 0 || bodies_ == 0) return;
    for (int fd : fds_) {
      if (fd >= 0 && readable(fd)) return changed();
    }
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
  int running_ = 0;  // threads not blocked (or woken and not yet blocked again)
  int bodies_ = 0;   // run()'s, running
  uint64_t generation_ = 0;
  std::multiset<time_point> deadlines_;
  std::multiset<int> fds_;  // those the blocked threads wait for (-1: none)
  std::list<std::function<bool()>> hooks_;
  std::set<std::thread::id> ended_;  // startThread()'s threads that ended, not yet joined
};

// An agent's process as the store (sim_group_store.h) or etcd (sim_etcd.h) sees it. Its state is
// read and changed with the world's mutex held.
struct SimProcess {
  bool dead = false;    // every connection it made is closed
  bool frozen = false;  // its threads stop where they next reach the store or etcd
  // Cut off from the others (a partition) since cut_since: its threads run, but nothing it sends
  // arrives and nothing reaches it — its calls wait out their bounds, its connections stay open.
  bool cut_off = false;
  Clock::time_point cut_since{};
};

// The job's store: a MemoryStore's data and semantics, its blocking waits in the world's time.
class SimClient : public store::Store {
 public:
  // `cutToo`, asked with the world's mutex held: whether the connection is cut otherwise (an
  // interrupt, the agent's death; sim_group_store.h).
  SimClient(SimWorld& world, store::MemoryStore& data, std::function<bool()> cutToo = {})
      : world_(world), data_(data), cut_too_(std::move(cutToo)) {}

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
    world_.block(lock, std::min(deadline, cut_at_), [&] { return cut() || data_.check(keys); });
    failIfCut();
    if (data_.check(keys)) return;
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
  bool cut() const { return world_.nowLocked() >= cut_at_ || (cut_too_ && cut_too_()); }
  void failIfCut() const {
    if (cut()) throw NetworkError("connection to the store closed");
  }

  SimWorld& world_;
  store::MemoryStore& data_;
  const std::function<bool()> cut_too_;
  Clock::time_point cut_at_ = Clock::time_point::max();
};

}  // namespace accel::launcher::testing
