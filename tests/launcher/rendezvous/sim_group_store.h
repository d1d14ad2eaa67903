#pragma once
// The job's store for whole groups over StoreRounds (c10d/store_rounds.h) in simulated time
// (sim_world.h): a SimStoreHost is the store and what its host knows (StoreHost: the presence waits
// and the failure watches parked, clearing the workers' keys), and each agent reaches it through a
// SimGroupStore of its own, whose connections are SimLinkStores — every call, wait and watch in the
// world's time. Each agent is a SimProcess the test can freeze (its threads stop where they next
// reach the store; its connections stay open, as a SIGSTOPped agent's or one behind a dead link do)
// or kill (every connection it made closes at once, its parked waits end, and the master sees it
// absent — as when a process dies and the kernel closes its sockets) or cut off (a partition: its
// calls wait out their bounds and fail; its watch fails once its TCP keep-alives would have, after
// RoundTimeouts' watch_idle + watch_probes x watch_interval; the master still sees its connections
// open). With a SimWorld as the group's clock (StoreRounds's `clock`), the link's thread is a
// thread of the world too.

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launcher/plan/round_timeouts.h"
#include "launcher/rendezvous/c10d/group_store.h"
#include "launcher/rendezvous/round/keys.h"
#include "sim_world.h"

namespace accel::launcher::testing {

class SimStoreHost : public StoreHost {
 public:
  SimStoreHost(SimWorld& world, const std::string& runId)
      : world_(world),
        presence_prefix_(JobKeys(runId).presencePrefix()),
        stop_prefix_(JobKeys(runId).stopPrefix()) {}

  SimWorld& world() const { return world_; }
  // With the world's mutex held: the store's host died (every connection to it is cut), or not.
  void downLocked() { down_ = true; }
  bool isDownLocked() const { return down_; }
  store::MemoryStore& data() { return data_; }
  // With the world's mutex held: a wait on `keys` was parked (+1) or ended (-1).
  void parkedLocked(const std::vector<std::string>& keys, int delta) {
    for (const auto& k : keys) parked_[k] += delta;
  }

  bool waiting(const std::string& presenceKey, std::chrono::milliseconds grace) const override {
    std::unique_lock lock(world_.mutex());
    return world_.block(lock, world_.nowLocked() + grace, [&] { return count(presenceKey) > 0; });
  }
  size_t presentCount() const override {
    std::lock_guard lock(world_.mutex());
    return under(presence_prefix_);
  }
  bool awaitPresentAtMost(size_t n, std::chrono::milliseconds timeout) const override {
    std::unique_lock lock(world_.mutex());
    return world_.block(lock, world_.nowLocked() + timeout,
                        [&] { return under(presence_prefix_) <= n; });
  }
  bool awaitWatches(size_t n, std::chrono::milliseconds timeout) const override {
    std::unique_lock lock(world_.mutex());
    return world_.block(lock, world_.nowLocked() + timeout,
                        [&] { return under(stop_prefix_) >= n; });
  }
  int64_t keepAlives(const std::string& key) const override {
    std::lock_guard lock(world_.mutex());
    return data_.check({key}) ? std::stoll(data_.get(key, std::chrono::milliseconds(0))) : 0;
  }
  size_t clearKeysExcept(const std::vector<std::string>& keep) override {
    std::lock_guard lock(world_.mutex());
    const size_t removed = data_.clearKeysExcept(keep);
    world_.changed();
    return removed;
  }

 private:
  int count(const std::string& key) const {
    auto it = parked_.find(key);
    return it == parked_.end() ? 0 : it->second;
  }
  // The waits parked on keys under `prefix`.
  size_t under(const std::string& prefix) const {
    size_t n = 0;
    for (const auto& [key, waits] : parked_) {
      if (key.rfind(prefix, 0) == 0 && waits > 0) n += static_cast<size_t>(waits);
    }
    return n;
  }

  SimWorld& world_;
  const std::string presence_prefix_, stop_prefix_;
  mutable store::MemoryStore data_;    // keepAlives() reads it (a read changes nothing)
  std::map<std::string, int> parked_;  // with the world's mutex held
  bool down_ = false;                  // with the world's mutex held
};

// One connection of an agent to the store.
class SimLinkStore : public LinkStore {
 public:
  SimLinkStore(SimStoreHost& host, std::shared_ptr<const SimProcess> process)
      : host_(host),
        world_(host.world()),
        process_(std::move(process)),
        state_(std::make_shared<State>()),
        client_(world_, host.data(), [this] { return cut(); }) {}
  // Closes the connection: a watch still parked ends.
  ~SimLinkStore() override {
    std::lock_guard lock(world_.mutex());
    state_->closed = true;
    if (parked_) parked_->closed = true;
    world_.changed();
  }

  void set(const std::string& key, const std::string& value) override {
    run(timeout_), client_.set(key, value);
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return run(timeout), client_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return run(timeout_), client_.add(key, delta);
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    return run(timeout_), client_.compareSet(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    run(timeout), client_.wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override {
    return run(timeout_), client_.check(keys);
  }
  bool deleteKey(const std::string& key) override { return run(timeout_), client_.deleteKey(key); }
  int64_t numKeys() override { return run(timeout_), client_.numKeys(); }

  // The watch: counted as parked by the host until the keys exist or the connection is cut or
  // closed; then its eventfd becomes readable — and also once its agent was cut off for its TCP
  // keep-alives' bound (the host, which does not know, counts it on).
  int startWait(const std::vector<std::string>& keys) override { return watchOn(state_, keys); }
  // As a watch whose end nobody reads: counted as parked by the host while the connection lives.
  // A park again ends the one before (the TCP client reconnects for it).
  void park(const std::vector<std::string>& keys) override {
    {
      std::lock_guard lock(world_.mutex());
      if (parked_) parked_->closed = true, world_.changed();
      parked_ = std::make_shared<State>();
    }
    watchOn(parked_, keys);
  }
  void finishWait() override {
    std::lock_guard lock(world_.mutex());
    if (cut()) throw NetworkError("connection to the store closed");
    if (state_->timed_out) throw NetworkError("connection timed out");
  }
  void interrupt() override {
    std::lock_guard lock(world_.mutex());
    state_->interrupted = true;
    if (parked_) parked_->interrupted = true;
    world_.changed();
  }
  // Calls block in waits, which take their own timeouts, and while the agent is cut off, for
  // this bound (a frozen agent's calls never end anyway).
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  void setConnectTimeouts(std::chrono::milliseconds, std::chrono::milliseconds) override {}

 private:
  struct State {  // shared with the watch's hook, which may outlive the connection by a change
    bool interrupted = false;
    bool closed = false;
    bool signalled = false;
    bool unparked = false;   // the host's wait ended
    bool timed_out = false;  // the agent's TCP gave the connection up (cut off too long)
    int watch_fd = -1;
    void signal() {
      if (std::exchange(signalled, true)) return;
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(watch_fd, &one, sizeof one);
    }
    ~State() {
      if (watch_fd >= 0) ::close(watch_fd);
    }
  };
  // The watch on `state`: counted as parked by the host until the keys exist or the connection
  // is cut or closed; then its eventfd becomes readable.
  int watchOn(std::shared_ptr<State> state, const std::vector<std::string>& keys) {
    std::lock_guard lock(world_.mutex());
    state->watch_fd = ::eventfd(0, EFD_CLOEXEC);
    host_.parkedLocked(keys, +1);
    world_.onChange([host = &host_, state, process = process_, keys] {
      const bool ended = state->closed || cut(*host, *state, *process);
      const bool served = ended || host->data().check(keys);  // the host's wait is over
      if (served && !state->unparked) host->parkedLocked(keys, -1);
      state->unparked |= served;
      // What the agent hears: nothing of the store's while it is cut off.
      const bool heard = ended || (served && !process->cut_off);
      if (!heard && !state->timed_out && timedOut(*host, *process)) {
        state->timed_out = true;
        state->signal();
      }
      if (heard) state->signal();
      return heard;
    });
    return state->watch_fd;
  }
  // Interrupted, or its agent died, or the store's did.
  static bool cut(const SimStoreHost& h, const State& s, const SimProcess& p) {
    return s.interrupted || p.dead || h.isDownLocked();
  }
  bool cut() const { return cut(host_, *state_, *process_); }
  // Cut off for longer than a waiting connection's TCP keep-alives allow.
  static bool timedOut(const SimStoreHost& h, const SimProcess& p) {
    const RoundTimeouts t;
    return p.cut_off &&
           h.world().nowLocked() >= p.cut_since + t.watch_idle + t.watch_probes * t.watch_interval;
  }
  // A frozen agent's call waits here (in no time) until it thaws or is cut; a cut-off one's until
  // the partition ends, or `bound` passed: then it fails as a call that got no answer.
  void run(std::chrono::milliseconds bound) {
    std::unique_lock lock(world_.mutex());
    world_.block(lock, Clock::time_point::max(), [&] { return !process_->frozen || cut(); });
    const auto until = bound == std::chrono::milliseconds::max() ? Clock::time_point::max()
                                                                 : world_.nowLocked() + bound;
    if (world_.block(lock, until, [&] { return !process_->cut_off || cut(); })) return;
    throw TimeoutError("no answer from the store within " + std::to_string(bound.count()) +
                       " ms (cut off)");
  }

  SimStoreHost& host_;
  SimWorld& world_;
  const std::shared_ptr<const SimProcess> process_;
  const std::shared_ptr<State> state_;
  std::shared_ptr<State> parked_;  // park()'s, with the world's mutex held
  SimClient client_;
  std::chrono::milliseconds timeout_ = std::chrono::milliseconds::max();
};

// One agent's way to the store; `master`: it hosts the store.
class SimGroupStore : public GroupStore {
 public:
  SimGroupStore(SimStoreHost& host, bool master)
      : host_(host), master_(master), process_(std::make_shared<SimProcess>()) {}

  // The agent's process died: every connection it made is cut, now and later — and every other
  // agent's too when it hosted the store. From any thread.
  void kill() {
    change([this](SimProcess& p) {
      p.dead = true;
      if (master_) host_.downLocked();
    });
  }
  // The agent's process stops (SIGSTOP) or thaws, its connections open.
  void freeze(bool frozen) {
    change([frozen](SimProcess& p) { p.frozen = frozen; });
  }
  // The agent's machine is cut off from the store's (a partition), or reached again.
  void cutOff(bool cut) {
    change([this, cut](SimProcess& p) {
      p.cut_off = cut;
      p.cut_since = host_.world().nowLocked();
    });
  }

  Expected<std::optional<probes::Route>> reach(std::chrono::milliseconds, std::chrono::milliseconds,
                                               const Notify&) override {
    return std::optional<probes::Route>();  // simulated: no route to name
  }
  std::unique_ptr<LinkStore> connect(std::chrono::milliseconds timeout) override {
    {
      std::unique_lock lock(host_.world().mutex());
      if (process_->dead) throw NetworkError("the agent's process is gone");
      if (host_.isDownLocked()) throw NetworkError("connection refused: the store is gone");
      if (!reachedWithin(lock, timeout)) throw NetworkError("no answer (cut off)");
    }
    return std::make_unique<SimLinkStore>(host_, process_);
  }
  Knock knock(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(host_.world().mutex());
    if (host_.isDownLocked()) return Knock::kRefused;
    return reachedWithin(lock, timeout) ? Knock::kAnswers : Knock::kSilent;
  }
  StoreHost* host() const override { return master_ ? &host_ : nullptr; }
  std::string address() const override { return "sim:29500"; }

 private:
  // With the world's mutex held: whether the store can be reached by `timeout` from now (at
  // once unless the agent is cut off).
  bool reachedWithin(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout) {
    SimWorld& world = host_.world();
    return world.block(lock, world.nowLocked() + timeout, [&] { return !process_->cut_off; });
  }
  template <class F>
  void change(F f) {
    std::lock_guard lock(host_.world().mutex());
    f(*process_);
    host_.world().changed();
  }

  SimStoreHost& host_;
  const bool master_;
  const std::shared_ptr<SimProcess> process_;
};

}  // namespace accel::launcher::testing
