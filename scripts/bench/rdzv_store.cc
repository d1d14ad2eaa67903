// One round of N agents (threads, one store connection each), for scripts/bench/rdzv_store.sh:
//   --tcp              the rounds' own rules (launcher/rendezvous/agent_rendezvous.h) over
//                      accel's own TCP store (a TcpStoreServer in this process)
//   --etcd HOST:PORT   the same rules over etcd (EtcdStore)
//   --etcd-round HOST:PORT  the meeting made for etcd (etcd/meeting.h: a put under a lease, one
//                      watch, one transaction closes the round)
// Every agent connects first (and, for --etcd-round, holds its lease, as an agent does for the
// whole job); then all start at once. Prints one line:
//   agents N  close S  requests R
// S: seconds from the start to the last agent placed; R: requests per agent to the store (etcd:
// HTTP requests, every try and watch included; TCP: the store calls, one request each).
//   rdzv_store_bench --agents N (--tcp | --etcd HOST:PORT | --etcd-round HOST:PORT)

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/etcd/meeting.h"
#include "launcher/rendezvous/etcd/store.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/tcp_store_client.h"

namespace {

using namespace accel;
using Clock = std::chrono::steady_clock;

// A store whose calls are counted (each one request on the TCP store).
class Counted : public store::Store {
 public:
  explicit Counted(std::unique_ptr<store::Store> inner) : inner_(std::move(inner)) {}
  void set(const std::string& k, const std::string& v) override { ++n_, inner_->set(k, v); }
  std::string get(const std::string& k, std::chrono::milliseconds t) override {
    return ++n_, inner_->get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override { return ++n_, inner_->add(k, d); }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return ++n_, inner_->compareSet(k, e, d);
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    ++n_, inner_->wait(k, t);
  }
  bool check(const std::vector<std::string>& k) override { return ++n_, inner_->check(k); }
  bool deleteKey(const std::string& k) override { return ++n_, inner_->deleteKey(k); }
  int64_t numKeys() override { return ++n_, inner_->numKeys(); }
  uint64_t requests() const { return n_; }

 private:
  std::unique_ptr<store::Store> inner_;
  uint64_t n_ = 0;
};

launcher::GroupSettings settingsOf(int agent, int agents) {
  launcher::GroupSettings o;
  o.run_id = "bench-" + std::to_string(::getpid());
  o.num_machines = o.min_machines = agents;
  o.local_world_size = 1;
  o.host = o.presence = "agent" + std::to_string(agent);
  o.store_address = "bench";
  o.timeouts.join = std::chrono::seconds(600);
  if (agent == 0) o.requested_machine_rank = 0;
  return o;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: rdzv_store_bench --agents N (--tcp | --etcd HOST:PORT | --etcd-round "
               "HOST:PORT)\n");
  std::exit(2);
}

launcher::EtcdOptions etcdOptions(const std::string& endpoint) {
  launcher::EtcdOptions o;
  o.endpoints = *launcher::parseEtcdEndpoints(endpoint);
  o.timeout = std::chrono::seconds(600);  // an add that loses to 1023 others keeps trying
  o.attempt_timeout = std::chrono::seconds(30);
  return o;
}

// Runs `agent(a)` for every agent on a thread of its own, all released at once; the seconds
// until the last returned, and whether every one said it was placed right.
std::pair<double, bool> race(int agents, const std::function<bool(int)>& agent) {
  std::mutex mutex;
  std::condition_variable go;
  bool started = false;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int a = 0; a < agents; ++a) {
    threads.emplace_back([&, a] {
      {
        std::unique_lock lock(mutex);
        go.wait(lock, [&] { return started; });
      }
      if (!agent(a)) ++failed;
    });
  }
  const auto start = Clock::now();
  {
    std::lock_guard lock(mutex);
    started = true;
  }
  go.notify_all();
  for (auto& t : threads) t.join();
  return {std::chrono::duration<double>(Clock::now() - start).count(), failed == 0};
}

// The rounds' own rules over `stores` (TCP or EtcdStore): seconds and requests per agent.
std::pair<double, double> overStores(std::vector<std::unique_ptr<store::Store>>& stores) {
  const int agents = static_cast<int>(stores.size());
  uint64_t before = 0;  // the connecting requests
  for (auto& s : stores) {
    if (auto* e = dynamic_cast<launcher::EtcdStore*>(s.get())) before += e->requests();
  }
  auto [seconds, ok] = race(agents, [&](int a) {
    auto r = launcher::rendezvous(*stores[static_cast<size_t>(a)], settingsOf(a, agents), {});
    if (r && r->world_size == agents) return true;
    std::fprintf(stderr, "agent %d: %s\n", a, r ? "wrong world size" : r.error().c_str());
    return false;
  });
  if (!ok) std::exit(1);
  uint64_t requests = 0;
  requests -= before;
  for (auto& s : stores) {
    if (auto* c = dynamic_cast<Counted*>(s.get())) requests += c->requests();
    if (auto* e = dynamic_cast<launcher::EtcdStore*>(s.get())) requests += e->requests();
  }
  return {seconds, static_cast<double>(requests) / agents};
}

// The meeting made for etcd: seconds and requests per agent (watches included).
std::pair<double, double> etcdRound(int agents, const std::string& endpoint) {
  std::vector<std::unique_ptr<launcher::EtcdClient>> clients;
  launcher::EtcdMeeting s;
  s.root = "accel-bench/";
  s.job.run_id = std::to_string(::getpid());
  s.job.min_machines = s.job.num_machines = agents;
  s.job.timeouts.join = std::chrono::seconds(600);
  std::vector<int64_t> leases;
  uint64_t before = 0;
  for (int a = 0; a < agents; ++a) {
    clients.push_back(std::make_unique<launcher::EtcdClient>(etcdOptions(endpoint)));
    leases.push_back(clients.back()->grantLease(std::chrono::seconds(60)));
    before += clients.back()->requests();
  }
  std::atomic<uint64_t> watches{0};
  auto [seconds, ok] = race(agents, [&](int a) {
    launcher::EtcdMeeting mine = s;
    mine.lease = leases[static_cast<size_t>(a)];
    const std::string name = "agent" + std::to_string(a);
    auto r = launcher::meetOnEtcd(*clients[static_cast<size_t>(a)], mine, {}, {name, name, "", 1});
    if (r) watches += static_cast<uint64_t>(r->watches);
    if (r && r->world_size == agents && r->machine_rank >= 0) return true;
    std::fprintf(stderr, "agent %d: %s\n", a, r ? "wrong world size" : r.error().c_str());
    return false;
  });
  if (!ok) std::exit(1);
  uint64_t requests = watches.load() - before;
  for (auto& c : clients) requests += c->requests();
  return {seconds, static_cast<double>(requests) / agents};
}

}  // namespace

int main(int argc, char** argv) {
  int agents = 0;
  std::string mode, endpoint;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--agents") && i + 1 < argc) {
      agents = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tcp") && mode.empty()) {
      mode = argv[i];
    } else if ((!std::strcmp(argv[i], "--etcd") || !std::strcmp(argv[i], "--etcd-round")) &&
               i + 1 < argc && mode.empty()) {
      mode = argv[i];
      endpoint = argv[++i];
    } else {
      usage();
    }
  }
  if (agents < 1 || mode.empty()) usage();
  std::pair<double, double> result;
  if (mode == "--etcd-round") {
    result = etcdRound(agents, endpoint);
  } else {
    std::unique_ptr<store::TcpStoreServer> server;
    if (mode == "--tcp") server = store::TcpStoreServer::start({});
    std::vector<std::unique_ptr<store::Store>> stores;
    for (int a = 0; a < agents; ++a) {
      if (server) {
        store::TcpStoreClientOptions c;
        c.port = server->port();
        stores.push_back(std::make_unique<Counted>(std::make_unique<store::TcpStoreClient>(c)));
      } else {
        auto e = std::make_unique<launcher::EtcdStore>(etcdOptions(endpoint),
                                                       "accel-bench/" + std::to_string(::getpid()));
        e->client().get("accel-bench/connect");  // connected before the start, as TCP clients are
        stores.push_back(std::move(e));
      }
    }
    result = overStores(stores);
  }
  std::printf("agents %d  close %.3f  requests %.1f\n", agents, result.first, result.second);
  return 0;
}
