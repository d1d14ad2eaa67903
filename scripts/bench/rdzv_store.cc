// One round of N agents (threads, one store connection each) through the rounds' own rules
// (launcher/rendezvous/agent_rendezvous.h), over etcd (EtcdStore) or over accel's own TCP store
// (a TcpStoreServer in this process), for scripts/bench/rdzv_store.sh. Every agent connects
// first; then all start at once. Prints one line:
//   agents N  close S  requests R
// S: seconds from the start to the last agent placed; R: requests per agent to the store (etcd:
// HTTP requests, every try and watch included; TCP: the store calls, one request each).
//   rdzv_store_bench --agents N (--etcd HOST:PORT | --tcp)

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/rendezvous/agent_rendezvous.h"
#include "launcher/rendezvous/etcd_store.h"
#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/tcp_store_server.h"

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
  std::fprintf(stderr, "usage: rdzv_store_bench --agents N (--etcd HOST:PORT | --tcp)\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int agents = 0;
  std::string etcd;
  bool tcp = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--agents") && i + 1 < argc)
      agents = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--etcd") && i + 1 < argc)
      etcd = argv[++i];
    else if (!std::strcmp(argv[i], "--tcp"))
      tcp = true;
    else
      usage();
  }
  if (agents < 1 || tcp == !etcd.empty()) usage();
  std::unique_ptr<store::TcpStoreServer> server;
  if (tcp) server = store::TcpStoreServer::start({});
  std::vector<std::unique_ptr<store::Store>> stores;
  for (int a = 0; a < agents; ++a) {
    if (tcp) {
      store::TcpStoreClientOptions c;
      c.port = server->port();
      stores.push_back(std::make_unique<Counted>(std::make_unique<store::TcpStoreClient>(c)));
    } else {
      launcher::EtcdOptions o;
      o.endpoints = *launcher::parseEtcdEndpoints(etcd);
      o.timeout = std::chrono::seconds(600);  // an add that loses to 1023 others keeps trying
      o.attempt_timeout = std::chrono::seconds(30);
      auto e =
          std::make_unique<launcher::EtcdStore>(o, "accel-bench/" + std::to_string(::getpid()));
      e->client().serverVersion();  // connected before the start, as the TCP clients are
      stores.push_back(std::move(e));
    }
  }
  uint64_t before = 0;  // the connecting requests
  for (auto& s : stores) {
    if (auto* e = dynamic_cast<launcher::EtcdStore*>(s.get())) before += e->requests();
  }
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
      auto r = launcher::rendezvous(*stores[static_cast<size_t>(a)], settingsOf(a, agents), {});
      if (!r || r->world_size != agents) {
        std::fprintf(stderr, "agent %d: %s\n", a, r ? "wrong world size" : r.error().c_str());
        ++failed;
      }
    });
  }
  const auto start = Clock::now();
  {
    std::lock_guard lock(mutex);
    started = true;
  }
  go.notify_all();
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t requests = 0;
  requests -= before;
  for (auto& s : stores) {
    if (auto* c = dynamic_cast<Counted*>(s.get())) requests += c->requests();
    if (auto* e = dynamic_cast<launcher::EtcdStore*>(s.get())) requests += e->requests();
  }
  if (failed) return 1;
  std::printf("agents %d  close %.3f  requests %.1f\n", agents, seconds,
              static_cast<double>(requests) / agents);
  return 0;
}
