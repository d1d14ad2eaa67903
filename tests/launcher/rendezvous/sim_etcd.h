#pragma once
// SimEtcd: an etcd cluster in simulated time (sim_world.h), for the rounds on etcd (etcd/meeting.h,
// etcd/lease.h, etcd/link.h, etcd/store.h, whole EtcdGroups) with the exact instants of what every
// agent does. What the rounds rely on is etcd's, kept here:
//   - one revision for the whole store, each write one more (a deletion of several keys at once —
//     a lease's end — one revision); a key's create and mod revisions;
//   - transactions (create, compare-and-swap) atomic, as every call is under the world's mutex;
//   - leases: keys attached to one go when it expires (its TTL after the last renewal, in the
//     world's time) or is revoked; renewing one that ended answers 0;
//   - watches from a revision on: every event at or after it, in order, nothing missed.
// And what goes wrong, at the instant a test chooses:
//   - an endpoint down (its process gone: calls to it are refused at once, its watches end), or
//     silent (its machine cut off: a try waits for the client's attempt timeout, its watches bring
//     nothing) — a client fails over to the next endpoint, as EtcdClient does;
//   - no leader (an election): every endpoint answers "no leader" at once and no lease expires;
//     the new leader extends every lease by its TTL (what etcd does, so an election costs no
//     agent its registrations);
//   - an agent's process dead (its calls and watches fail at once, so its lease is renewed no
//     more) or frozen (its calls wait, and its watches bring nothing, until it thaws), or its
//     machine cut off (every endpoint silent to it, its watches bring nothing).
// An agent reaches the cluster through access(process): EtcdApi clients and the world as clock.

#include <sys/eventfd.h>
#include <unistd.h>

#include <deque>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "accel/error.h"
#include "launcher/rendezvous/etcd/api.h"
#include "sim_world.h"

namespace accel::launcher::testing {

class SimEtcd {
 public:
  enum class Endpoint { kUp, kDown, kSilent };

  SimEtcd(std::shared_ptr<SimWorld> world, int endpoints = 1)
      : world_(std::move(world)), endpoints_(static_cast<size_t>(endpoints), Endpoint::kUp) {
    expiry_ = world_->startThread([this] { expireLeases(); });
  }
  ~SimEtcd() {
    {
      std::lock_guard lock(world_->mutex());
      stopped_ = true;
      world_->changed();
    }
    expiry_.join();
    for (auto& w : watchers_) ::close(w->fd);
  }
  SimEtcd(const SimEtcd&) = delete;
  SimEtcd& operator=(const SimEtcd&) = delete;

  // What `process`'s agent reaches etcd through.
  EtcdAccess access(std::shared_ptr<const SimProcess> process);
  // Options naming every endpoint ("etcd-0:2379", ...), for what prints them.
  EtcdOptions options() const {
    EtcdOptions o;
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      EtcdEndpoint e;
      e.host = name(i);
      o.endpoints.push_back(e);
    }
    return o;
  }

  // --- what goes wrong (from any thread) ---
  void setEndpoint(size_t at, Endpoint state) {
    change([&] {
      endpoints_.at(at) = state;
      if (state == Endpoint::kDown) {
        for (auto& w : watchers_) w->ended = w->ended || w->endpoint == at;
      }
    });
  }
  void loseLeader() {
    change([&] { leader_ = false; });
  }
  // A new leader: every lease lives its TTL from now.
  void electLeader() {
    change([&] {
      leader_ = true;
      for (auto& [id, lease] : leases_) lease.expires = world_->nowLocked() + lease.ttl;
    });
  }
  // `process` died or froze (or thawed): its calls and watches see it at once.
  void kill(SimProcess& process) {
    change([&] { process.dead = true; });
  }
  void freeze(SimProcess& process, bool frozen) {
    change([&] { process.frozen = frozen; });
  }
  // `process`'s machine is cut off from every member (a partition), or reaches them again: while
  // cut off every endpoint is silent to it and its watches bring nothing.
  void cutOff(SimProcess& process, bool cut) {
    change([&] {
      process.cut_off = cut;
      process.cut_since = world_->nowLocked();
    });
  }

  // --- for assertions (from any thread) ---
  std::optional<std::string> value(const std::string& key) const {
    std::lock_guard lock(world_->mutex());
    auto it = kv_.find(key);
    return it == kv_.end() ? std::nullopt : std::optional<std::string>(it->second.value);
  }
  // When the last lease `process` was granted ended (expired or revoked), in ms of the world's
  // time; -1: none ended.
  int64_t leaseEndedMs(const SimProcess& process) const {
    std::lock_guard lock(world_->mutex());
    auto it = ended_.find(&process);
    if (it == ended_.end()) return -1;
    return std::chrono::duration_cast<std::chrono::milliseconds>(it->second - SimWorld::at({}))
        .count();
  }
  std::vector<std::string> keysUnder(const std::string& prefix) const {
    std::lock_guard lock(world_->mutex());
    std::vector<std::string> keys;
    for (const auto& [k, v] : kv_) {
      if (k.rfind(prefix, 0) == 0) keys.push_back(k);
    }
    return keys;
  }

 private:
  class Client;
  class Watch;
  struct Watcher {
    std::string key;
    bool prefix = false;
    size_t endpoint = 0;
    std::shared_ptr<const SimProcess> process;
    std::deque<EtcdEvent> queue;
    int fd = -1;  // readable while next() has something to say
    bool ended = false;
    bool closed = false;  // its owner let it go
  };
  struct Lease {
    std::chrono::seconds ttl{};
    Clock::time_point expires;
    std::set<std::string> keys;
    const SimProcess* owner = nullptr;  // the process whose client was granted it
  };

  static std::string name(size_t at) { return "etcd-" + std::to_string(at); }

  template <class F>
  void change(F f) {
    std::lock_guard lock(world_->mutex());
    f();
    ++changes_;
    changedLocked();
  }
  // With the world's mutex held: every watch's descriptor says whether next() has something, and
  // every blocked thread looks again.
  void changedLocked() {
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      Watcher& w = **it;
      if (w.closed) {
        ::close(w.fd);
        it = watchers_.erase(it);
        continue;
      }
      uint64_t drained;
      while (::read(w.fd, &drained, sizeof drained) == sizeof drained) {
      }
      if (deliverable(w)) {
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(w.fd, &one, sizeof one);
      }
      ++it;
    }
    world_->changed();
  }
  bool deliverable(const Watcher& w) const {
    if (w.ended || w.process->dead) return true;  // next() throws
    return !w.queue.empty() && endpoints_[w.endpoint] == Endpoint::kUp && !w.process->frozen &&
           !w.process->cut_off;
  }
  static bool matches(const Watcher& w, const std::string& key) {
    return w.prefix ? key.rfind(w.key, 0) == 0 : key == w.key;
  }
  void emitLocked(const EtcdEvent& e) {
    log_.push_back(e);
    for (auto& w : watchers_) {
      if (!w->ended && matches(*w, e.kv.key)) w->queue.push_back(e);
    }
  }

  // --- the store, with the world's mutex held ---
  // `sameRevision`: a later put of one transaction (at the revision of its first).
  int64_t putLocked(const std::string& key, const std::string& value, int64_t lease,
                    bool sameRevision = false) {
    if (lease != 0 && !leases_.count(lease)) throw Error("etcdserver: requested lease not found");
    if (!sameRevision) ++revision_;
    auto [it, created] = kv_.try_emplace(key);
    EtcdKeyValue& kv = it->second;
    if (!created && kv.lease != 0 && leases_.count(kv.lease)) leases_[kv.lease].keys.erase(key);
    kv = {key,
          value,
          created ? revision_ : kv.create_revision,
          revision_,
          created ? 1 : kv.version + 1,
          lease};
    if (lease != 0) leases_[lease].keys.insert(key);
    emitLocked({false, kv, {}});
    changedLocked();
    return revision_;
  }
  // Deletes `keys` (those that exist) at one revision; how many there were.
  int64_t removeLocked(const std::vector<std::string>& keys) {
    std::vector<std::string> present;
    for (const auto& k : keys) {
      if (kv_.count(k)) present.push_back(k);
    }
    if (present.empty()) return 0;
    ++revision_;
    for (const auto& k : present) {
      const int64_t lease = kv_[k].lease;
      if (lease != 0 && leases_.count(lease)) leases_[lease].keys.erase(k);
      EtcdKeyValue gone;
      gone.key = k;
      gone.mod_revision = revision_;
      emitLocked({true, gone, kv_[k]});
      kv_.erase(k);
    }
    changedLocked();
    return static_cast<int64_t>(present.size());
  }
  std::vector<std::string> keysUnderLocked(const std::string& prefix) const {
    std::vector<std::string> keys;
    for (auto it = kv_.lower_bound(prefix); it != kv_.end() && it->first.rfind(prefix, 0) == 0;
         ++it)
      keys.push_back(it->first);
    return keys;
  }
  void endLeaseLocked(int64_t id) {
    auto it = leases_.find(id);
    if (it == leases_.end()) return;
    if (it->second.owner) ended_[it->second.owner] = world_->nowLocked();
    const std::vector<std::string> keys(it->second.keys.begin(), it->second.keys.end());
    leases_.erase(it);
    removeLocked(keys);
    changedLocked();
  }

  // The expiry thread: each lease ends at its instant, unless renewed (or the cluster has no
  // leader then).
  void expireLeases() {
    std::unique_lock lock(world_->mutex());
    while (!stopped_) {
      Clock::time_point next = Clock::time_point::max();
      std::vector<int64_t> due;
      for (const auto& [id, lease] : leases_) {
        if (!leader_) break;
        if (lease.expires <= world_->nowLocked()) {
          due.push_back(id);
        } else {
          next = std::min(next, lease.expires);
        }
      }
      for (int64_t id : due) endLeaseLocked(id);
      if (!due.empty()) continue;
      const auto seen = changes_;
      world_->block(lock, next, [&] { return stopped_ || changes_ != seen; });
    }
  }

  const std::shared_ptr<SimWorld> world_;
  std::vector<Endpoint> endpoints_;
  bool leader_ = true;
  std::map<std::string, EtcdKeyValue> kv_;
  int64_t revision_ = 1;
  std::map<int64_t, Lease> leases_;
  std::map<const SimProcess*, Clock::time_point> ended_;  // when each process's lease ended
  int64_t next_lease_ = 7000;
  std::vector<EtcdEvent> log_;  // every event, in revision order
  std::list<std::shared_ptr<Watcher>> watchers_;
  uint64_t changes_ = 0;  // leases or the leader changed: the expiry thread looks again
  bool stopped_ = false;
  std::thread expiry_;
};

// A watch of one agent, on one endpoint.
class SimEtcd::Watch : public EtcdWatchStream {
 public:
  Watch(SimEtcd& etcd, std::shared_ptr<Watcher> w) : etcd_(etcd), w_(std::move(w)) {}
  ~Watch() override {
    std::lock_guard lock(etcd_.world_->mutex());
    w_->closed = true;
  }
  int fd() const override { return w_->fd; }
  std::vector<EtcdEvent> next(Clock::time_point deadline) override {
    SimWorld& world = *etcd_.world_;
    std::unique_lock lock(world.mutex());
    world.block(lock, deadline, [&] { return etcd_.deliverable(*w_); });
    if (w_->process->dead || w_->ended) {
      throw NetworkError("etcd at " + name(w_->endpoint) + ":2379 ended the watch");
    }
    if (!etcd_.deliverable(*w_)) return {};
    std::vector<EtcdEvent> events(w_->queue.begin(), w_->queue.end());
    w_->queue.clear();
    uint64_t drained;
    while (::read(w_->fd, &drained, sizeof drained) == sizeof drained) {
    }
    return events;
  }

 private:
  SimEtcd& etcd_;
  const std::shared_ptr<Watcher> w_;
};

// One agent's client, of the endpoints `reach` (every one, or the one pinned()).
class SimEtcd::Client : public EtcdApi {
 public:
  Client(SimEtcd& etcd, std::shared_ptr<const SimProcess> process, EtcdOptions options,
         std::vector<size_t> reach)
      : etcd_(etcd),
        world_(*etcd.world_),
        process_(std::move(process)),
        options_(std::move(options)),
        reach_(std::move(reach)),
        current_(options_.first_endpoint % reach_.size()) {}

  int64_t put(const std::string& key, const std::string& value, int64_t lease = 0) override {
    return call([&] { return etcd_.putLocked(key, value, lease); });
  }
  EtcdEnrollment enroll(const std::vector<std::pair<std::string, std::string>>& keyValues,
                        const std::string& create, const std::string& value,
                        const std::string& unless, int64_t lease) override {
    return call([&] {
      EtcdEnrollment out;
      out.created = !etcd_.kv_.count(create) && !etcd_.kv_.count(unless);
      if (!out.created && etcd_.kv_.count(unless)) out.read = etcd_.kv_[unless];
      for (const auto& [key, v] : keyValues) {
        out.revision = etcd_.putLocked(key, v, lease, out.revision != 0);
      }
      if (out.created) out.revision = etcd_.putLocked(create, value, lease, out.revision != 0);
      if (out.revision == 0) out.revision = etcd_.revision_;
      return out;
    });
  }
  std::vector<std::optional<EtcdKeyValue>> getMany(const std::vector<std::string>& keys) override {
    return call([&] {
      std::vector<std::optional<EtcdKeyValue>> out;
      for (const auto& k : keys) {
        auto it = etcd_.kv_.find(k);
        out.push_back(it == etcd_.kv_.end() ? std::nullopt
                                            : std::optional<EtcdKeyValue>(it->second));
      }
      return out;
    });
  }
  std::optional<EtcdKeyValue> get(const std::string& key) override {
    return call([&] {
      auto it = etcd_.kv_.find(key);
      return it == etcd_.kv_.end() ? std::nullopt : std::optional<EtcdKeyValue>(it->second);
    });
  }
  std::vector<EtcdKeyValue> getPrefix(const std::string& prefix) override {
    return call([&] {
      std::vector<EtcdKeyValue> all;
      for (const auto& k : etcd_.keysUnderLocked(prefix)) all.push_back(etcd_.kv_[k]);
      return all;
    });
  }
  bool create(const std::string& key, const std::string& value, int64_t lease = 0) override {
    return call([&] { return !etcd_.kv_.count(key) && etcd_.putLocked(key, value, lease) > 0; });
  }
  bool compareAndSwap(const std::string& key, int64_t revision, const std::string& value,
                      int64_t lease = 0) override {
    return call([&] {
      auto it = etcd_.kv_.find(key);
      const int64_t now = it == etcd_.kv_.end() ? 0 : it->second.mod_revision;
      return now == revision && etcd_.putLocked(key, value, lease) > 0;
    });
  }
  std::optional<EtcdKeyValue> compareValueAndSet(const std::string& key,
                                                 const std::string& expected,
                                                 const std::string& desired) override {
    return call([&] {
      auto it = etcd_.kv_.find(key);
      const bool holds = expected.empty() ? it == etcd_.kv_.end()
                                          : it != etcd_.kv_.end() && it->second.value == expected;
      if (holds) etcd_.putLocked(key, desired, 0);
      it = etcd_.kv_.find(key);
      return it == etcd_.kv_.end() ? std::nullopt : std::optional<EtcdKeyValue>(it->second);
    });
  }
  int64_t countPrefix(const std::string& prefix) override {
    return call([&] { return static_cast<int64_t>(etcd_.keysUnderLocked(prefix).size()); });
  }
  std::optional<EtcdKeyValue> firstKeyFrom(const std::string& prefix,
                                           const std::string& from) override {
    return call([&] {
      std::optional<EtcdKeyValue> first;
      for (const auto& k : etcd_.keysUnderLocked(prefix)) {
        if (k >= from) return std::optional<EtcdKeyValue>(etcd_.kv_[k]);
      }
      return first;
    });
  }
  bool remove(const std::string& key) override {
    return call([&] { return etcd_.removeLocked({key}) > 0; });
  }
  int64_t deletePrefix(const std::string& prefix) override {
    return call([&] { return etcd_.removeLocked(etcd_.keysUnderLocked(prefix)); });
  }
  int64_t grantLease(std::chrono::seconds ttl) override {
    return call([&] {
      const int64_t id = etcd_.next_lease_++;
      etcd_.leases_[id] = {ttl, world_.nowLocked() + ttl, {}, process_.get()};
      ++etcd_.changes_;
      etcd_.changedLocked();
      return id;
    });
  }
  int64_t keepAlive(int64_t id) override {
    return call([&] {
      auto it = etcd_.leases_.find(id);
      if (it == etcd_.leases_.end()) return int64_t{0};
      it->second.expires = world_.nowLocked() + it->second.ttl;
      ++etcd_.changes_;
      etcd_.changedLocked();
      return static_cast<int64_t>(it->second.ttl.count());
    });
  }
  void revokeLease(int64_t id) override {
    call([&] {
      etcd_.endLeaseLocked(id);
      ++etcd_.changes_;
      return 0;
    });
  }

  // On the endpoint in use, from `from` on: what the log holds since, then what comes.
  std::unique_ptr<EtcdWatchStream> watch(const std::string& key, bool prefix, int64_t from,
                                         Clock::time_point deadline) override {
    auto w = std::make_shared<Watcher>();
    w->key = key, w->prefix = prefix;
    return open(std::move(w), from, deadline);
  }
  std::unique_ptr<EtcdWatchStream> open(std::shared_ptr<Watcher> w, int64_t from,
                                        Clock::time_point deadline) {
    const std::string key = w->key;
    w->endpoint = reach_[current_], w->process = process_;
    std::unique_lock lock(world_.mutex());
    awaitRunning(lock);
    const Endpoint state = process_->cut_off ? Endpoint::kSilent : etcd_.endpoints_[w->endpoint];
    if (state == Endpoint::kSilent) {
      world_.block(lock, deadline, [&] { return process_->dead; });
    }
    if (state != Endpoint::kUp || process_->dead) {
      throw NetworkError("etcd at " + name(w->endpoint) + ":2379 did not open a watch of '" + key +
                         "'");
    }
    for (const auto& e : etcd_.log_) {
      if (e.kv.mod_revision >= from && matches(*w, e.kv.key)) w->queue.push_back(e);
    }
    w->fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    etcd_.watchers_.push_back(w);
    etcd_.changedLocked();
    return std::make_unique<Watch>(etcd_, w);
  }
  std::unique_ptr<EtcdApi> pinned(std::chrono::milliseconds timeout) const override {
    EtcdOptions alone = options_;
    alone.timeout = alone.attempt_timeout = timeout;
    alone.first_endpoint = 0;
    return std::make_unique<Client>(etcd_, process_, alone, std::vector<size_t>{reach_[current_]});
  }
  std::string endpointInUse() const override { return name(reach_[current_]) + ":2379"; }
  void passOver(const std::string& endpoint) override {
    if (endpointInUse() == endpoint) current_ = (current_ + 1) % reach_.size();
  }
  int64_t revision() const override { return revision_; }
  std::chrono::milliseconds timeout() const override { return options_.timeout; }
  uint64_t requests() const override { return requests_; }

 private:
  // A frozen process's call waits until it thaws; a dead one's fails.
  void awaitRunning(std::unique_lock<std::mutex>& lock) {
    world_.block(lock, Clock::time_point::max(),
                 [&] { return !process_->frozen || process_->dead; });
    if (process_->dead) throw NetworkError("the agent's process is gone");
  }
  // `f` on the first endpoint that serves, from the one that answered last (or the one after the
  // last that failed), as EtcdClient's call: a silent one costs the attempt timeout, a round of
  // refusals a 50 ms pause.
  template <class F>
  auto call(F f) -> decltype(f()) {
    std::unique_lock lock(world_.mutex());
    awaitRunning(lock);
    const auto deadline = world_.nowLocked() + options_.timeout;
    size_t at = current_;
    for (size_t tries = 0;; ++tries) {
      ++requests_;
      const bool fullTry = tries == 0 || deadline - world_.nowLocked() >= options_.attempt_timeout;
      const Endpoint state = process_->cut_off ? Endpoint::kSilent : etcd_.endpoints_[reach_[at]];
      if (state == Endpoint::kUp && etcd_.leader_) {
        auto result = f();
        revision_ = etcd_.revision_;
        current_ = at;
        return result;
      }
      if (state == Endpoint::kSilent) {
        world_.block(lock, std::min(deadline, world_.nowLocked() + options_.attempt_timeout),
                     [&] { return process_->dead; });
      }
      // The next try starts at the next endpoint; the next call too, unless the call's end cut
      // this try short (as EtcdClient::call).
      at = (at + 1) % reach_.size();
      if (fullTry) current_ = at;
      if (process_->dead) throw NetworkError("the agent's process is gone");
      if (world_.nowLocked() >= deadline) {
        throw NetworkError("no etcd endpoint answered within " +
                           std::to_string(options_.timeout.count()) + " ms (simulated)");
      }
      if ((tries + 1) % reach_.size() == 0) {
        world_.block(lock, std::min(deadline, world_.nowLocked() + std::chrono::milliseconds(50)),
                     [&] { return process_->dead; });
      }
    }
  }

  SimEtcd& etcd_;
  SimWorld& world_;
  const std::shared_ptr<const SimProcess> process_;
  const EtcdOptions options_;
  const std::vector<size_t> reach_;  // indices into the cluster's endpoints
  size_t current_;                   // into reach_
  int64_t revision_ = 0;
  uint64_t requests_ = 0;
};

inline EtcdAccess SimEtcd::access(std::shared_ptr<const SimProcess> process) {
  std::vector<size_t> all;
  for (size_t i = 0; i < endpoints_.size(); ++i) all.push_back(i);
  return {[this, process, all](const EtcdOptions& o) -> std::unique_ptr<EtcdApi> {
            return std::make_unique<Client>(*this, process, o, all);
          },
          world_};
}

}  // namespace accel::launcher::testing
