// One round of N simulated machines — the agents' own rendezvous clients, no workers — spread
// over several processes with real sockets, for scripts/bench/rdzv_scale.sh (issue 52):
//
//   rdzv_scale_bench store --machines N [--procs P]
//       accel's store: a server process (the TcpStoreServer an agent hosts, with machine 0's
//       agent in it, as in a job) and P agent processes. Every simulated machine holds what an
//       agent holds in the store while it meets: its connection, with its presence parked on it (a
//       WAIT on its presence key that nobody answers), then runs the round (rendezvous(),
//       c10d/rendezvous.h) once all are connected. Prints one row:
//         store N CLOSE_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE EVENTS_PER_MACHINE
//               SERVER_CPU_S SERVER_PEAK_MIB
//       (requests, bytes both ways and WAITs answered as the server counted them during the round;
//       the server's CPU and peak resident memory over its whole life).
//   rdzv_scale_bench store --machines N [--procs P] --loss
//       The same round, then a loss: every machine holds its failure watch and sends its
//       keep-alives (c10d/job_link.h's protocol; the master runs the real JobLink), the group runs
//       idle for a few seconds, then one machine goes silent (its connections stay open, as a
//       machine cut off). The master finds it lost, every machine ends the round with the real
//       exchange (RoundCloser, round_close.h) and meets again as N-1. Prints
//         store-loss N FOUND_S REFORMED_S IDLE_SERVER_CPU_PER_S
//       (found: from the silence to the master's publication of the loss; re-formed: to the last
//       machine placed in the next round; the server's CPU per second of the idle group, its
//       master's looks at the members included). --tcp-reads: the reference,
//       "store-loss-tcp-reads", whose master reads every member's keep-alive counter with a request
//       to its own store, as the link did before it read them in the store's memory
//       (StoreHost::keepAlives).
//   rdzv_scale_bench etcd --endpoints E --machines N [--procs P]
//       etcd: P agent processes; every machine holds a lease, then meets (meetOnEtcd,
//       etcd/meeting.h). Prints "etcd N CLOSE_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE
//       EVENTS_PER_MACHINE" (HTTP requests, watches included; bytes both ways and watch events
//       received, as the agents counted them: etcdTraffic); the script adds the members' CPU and
//       memory.
//
//   rdzv_scale_bench etcd --endpoints E --machines N [--procs P] --loss [--server-pids P,P,P]
//       The same round on etcd, then a loss: every machine holds what its agent holds while the
//       round runs — its lease renewed every keep-alive interval (EtcdLease) and its round's link
//       (EtcdLink: the stop record, the members, the next round's registrations, and its
//       endpoint asked every interval) — the group idles a few seconds, then one machine stops
//       renewing its lease (a machine cut off). Every other machine's link tells of the loss,
//       it ends the round (RoundCloser over EtcdStore) and meets again as N-1. Prints
//         etcd-loss N FOUND_S REFORMED_S IDLE_SERVER_CPU_PER_S
//       (found: from the silence to the first link that told of it; re-formed: to the last
//       machine placed in the next round; the members' CPU per second while the group idled,
//       read from /proc for --server-pids).
//   rdzv_scale_bench etcd-renewals --endpoints E --machines N [--procs P] --server-pids P,P,P
//       What an idle group costs etcd: every machine's lease renewed every keep-alive interval
//       (EtcdLease, nothing else), on its kept gRPC stream, then through the JSON gateway (the
//       reference, renew_over_grpc false), each for 5 s after one interval's warm-up. Prints
//         etcd-renewals N GRPC_SERVER_CPU_PER_S GATEWAY_SERVER_CPU_PER_S
//   rdzv_scale_bench etcd-end --endpoints E --machines N [--procs P]
//       etcd: the end of a round in which one machine (the last) was lost — the exchange every
//       agent runs then (RoundCloser, round_close.h, over EtcdStore: its end reported, the others'
//       awaited, the decision made and published; on etcd every agent decides, the first decision
//       published stands), with the round's stop record in place as the link publishes it. Prints
//       "etcd-end N DECIDED_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE" (the last decision from the
//       go; requests as the agents' stores counted them).
//
// CLOSE_S: from the instant every machine is connected and told to go to the last one placed
// (CLOCK_MONOTONIC, one clock for every process of the machine). The processes talk to the driver
// through their stdin and stdout: a child prints "ready" once connected, runs at "go", prints
// "done ..." and, for the store's server, waits for its stdin to close to print its own numbers.
// Agent processes reach the store at 127.0.0.(2+i): every loopback address has its own ephemeral
// ports, so more than ~28k connections fit. File descriptors: each process raises its soft limit
// to the hard one; a size that needs more says so and stops.

#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/rendezvous/c10d/job_link.h"
#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/c10d/store_rounds.h"
#include "launcher/rendezvous/etcd/client/etcd_client.h"
#include "launcher/rendezvous/etcd/lease.h"
#include "launcher/rendezvous/etcd/link.h"
#include "launcher/rendezvous/etcd/meeting.h"
#include "launcher/rendezvous/etcd/store.h"
#include "launcher/rendezvous/round/stop.h"
#include "launcher/rendezvous/round_close.h"
#include "launcher/rendezvous/store_host.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/tcp_store_client.h"

namespace {

using namespace accel;
using namespace std::chrono_literals;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "rdzv_scale_bench: %s\n", why.c_str());
  std::exit(1);
}

// The soft descriptor limit raised to the hard one; dies naming both when `need` do not fit
// (`advice`: what to change).
void haveDescriptors(uint64_t need, const char* who, const char* advice) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  if (need + 64 > r.rlim_cur) {
    die(std::string(who) + " needs " + std::to_string(need) +
        " descriptors; this machine allows a process " + std::to_string(r.rlim_cur) +
        " (ulimit -Hn): " + advice);
  }
}

// Runs fn(i) for i in [0, count) on threads of 256 KiB stacks (thousands of them per process).
void onThreads(int count, const std::function<void(int)>& fn) {
  struct Job {
    const std::function<void(int)>* fn;
    int i;
  };
  std::vector<pthread_t> threads(static_cast<size_t>(count));
  std::vector<Job> jobs(static_cast<size_t>(count));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  for (int i = 0; i < count; ++i) {
    jobs[static_cast<size_t>(i)] = {&fn, i};
    auto body = [](void* p) -> void* {
      auto* job = static_cast<Job*>(p);
      (*job->fn)(job->i);
      return nullptr;
    };
    if (pthread_create(&threads[static_cast<size_t>(i)], &attr, body,
                       &jobs[static_cast<size_t>(i)]))
      die("cannot start thread " + std::to_string(i) + ": " + std::strerror(errno));
  }
  for (auto& t : threads) pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

// A gate every thread of a process waits at until the driver says "go" (on stdin).
class Gate {
 public:
  void await() {
    std::unique_lock lock(mutex_);
    open_cv_.wait(lock, [this] { return open_; });
  }
  void arrive() {
    std::lock_guard lock(mutex_);
    ++arrived_;
    arrived_cv_.notify_all();
  }
  void awaitArrivals(int n) {
    std::unique_lock lock(mutex_);
    arrived_cv_.wait(lock, [&] { return arrived_ >= n; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    open_cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable open_cv_, arrived_cv_;
  bool open_ = false;
  int arrived_ = 0;
};

// This process's peak resident memory, KiB.
long peakKib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Reads lines from stdin until `word` (false at EOF).
bool readUntil(const char* word) {
  char line[256];
  while (std::fgets(line, sizeof line, stdin)) {
    if (!std::strncmp(line, word, std::strlen(word))) return true;
  }
  return false;
}

// A child's thread that follows the driver: "ready" once `count` machines arrived at the gate,
// the gate opened at "go"; with a loss phase (`silentNs`), the instant of "loss" there.
std::thread followDriver(Gate& gate, int count, std::atomic<int64_t>* silentNs) {
  return std::thread([&gate, count, silentNs] {
    gate.awaitArrivals(count);
    std::printf("ready\n");
    std::fflush(stdout);
    if (!readUntil("go")) std::exit(1);
    gate.open();
    if (!silentNs) return;
    if (!readUntil("loss")) std::exit(1);
    *silentNs = nowNs();
  });
}

// What a child prints last: the latest placement, the requests made, how many failed.
struct Placed {
  std::atomic<int64_t> last_ns{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<int> failed{0};
  void at(int64_t ns) {
    int64_t seen = last_ns.load();
    while (seen < ns && !last_ns.compare_exchange_weak(seen, ns)) {
    }
  }
  void print() const {
    std::printf("done placed_ns=%lld requests=%llu failed=%d\n",
                static_cast<long long>(last_ns.load()),
                static_cast<unsigned long long>(requests.load()), failed.load());
    std::fflush(stdout);
  }
};

// The loss phase (--loss), shared by a process's machines: at the driver's "loss" the silent
// machine (the job's last) stops its keep-alives, its connections kept open until the process
// ends (a machine cut off); the placements in the next round.
struct Loss {
  bool on = false;
  // The master's: where its link reads the keep-alives without a request (nullptr: over TCP,
  // as before, the reference).
  const launcher::StoreHost* host = nullptr;
  std::atomic<int64_t> silent_ns{0};
  Placed again;
  std::mutex mutex;
  std::vector<std::unique_ptr<store::TcpStoreClient>> kept;  // the silent machine's, open
  void keep(std::unique_ptr<store::TcpStoreClient> c) {
    std::lock_guard lock(mutex);
    kept.push_back(std::move(c));
  }
};

// Machine `index` of a loss phase: whether it is the one that goes silent.
bool goesSilent(const launcher::GroupSettings& o, int index) { return index == o.num_machines - 1; }

launcher::GroupSettings storeSettings(const std::string& run, int machines, int index, bool loss) {
  launcher::GroupSettings o;
  o.run_id = run;
  o.num_machines = o.min_machines = machines;
  if (loss) o.min_machines = machines - 1, o.max_restarts = 1;  // the group goes on without one
  o.local_world_size = 1;
  o.host = "m" + std::to_string(index);
  o.presence = launcher::agentToken(o.host);
  o.store_address = "bench";
  o.timeouts.join = 600s;
  if (index == 0) o.requested_machine_rank = 0;
  return o;
}

std::unique_ptr<store::TcpStoreClient> connectTo(const std::string& host, int port) {
  store::TcpStoreClientOptions c;
  c.host = host;
  c.port = port;
  c.timeout = 600s;
  c.connect_timeout = 120s;
  return std::make_unique<store::TcpStoreClient>(c);
}

// A member's round after the loss: its end told and the decision read (RoundCloser), then the
// next round met.
void endAndMeetAgain(store::TcpStoreClient& client, const launcher::GroupSettings& o,
                     const launcher::RendezvousResult& joined, Loss& loss,
                     const launcher::RoundCloser::GroupNow& now, bool master) {
  launcher::AttemptReport last;
  launcher::RoundCloser closer(o, master);
  const auto decision = closer.close(client, {}, joined, last, false, now);
  auto r = decision.restart ? launcher::rendezvous(client, o, decision.next(0))
                            : Expected<launcher::RendezvousResult>(makeError(decision.why));
  loss.again.at(nowNs());
  if (!r || r->world_size != o.num_machines - 1) {
    std::fprintf(stderr, "%s, round 1: %s\n", o.host.c_str(),
                 r ? "wrong world size" : r.error().c_str());
    ++loss.again.failed;
  }
}

// A non-master after the round: its failure watch and its keep-alives, as its link does, until
// the watch fires; then the round's end. The silent one stops at the loss, its connections kept
// open; whether it did.
bool followAsMember(const std::string& host, int port, store::TcpStoreClient& client,
                    const launcher::GroupSettings& o, const launcher::RendezvousResult& joined,
                    int index, Loss& loss) {
  auto keepAlive = connectTo(host, port), watch = connectTo(host, port);
  const auto keys = launcher::roundKeys(o, 0);
  pollfd fired{watch->startWait({keys.stop()}), POLLIN, 0};
  const int interval = static_cast<int>(o.timeouts.keep_alive_interval.count());
  while (::poll(&fired, 1, 0) == 0) {
    if (goesSilent(o, index) && loss.silent_ns.load()) {
      loss.keep(std::move(keepAlive)), loss.keep(std::move(watch));
      return true;
    }
    keepAlive->add(keys.alive(joined.machine_rank), 1);
    ::poll(&fired, 1, interval);
  }
  watch->finishWait();
  endAndMeetAgain(client, o, joined, loss,
                  {[] { return std::vector<launcher::LostMachine>{}; }, [] { return 0; }}, false);
  return false;
}

// The master after the round: the real JobLink watches the members; once it published the loss
// (the instant it heard: `found`), the master decides and meets again.
void followAsMaster(const std::string& host, int port, store::TcpStoreClient& client,
                    const launcher::GroupSettings& o, const launcher::RendezvousResult& joined,
                    Loss& loss, std::atomic<int64_t>& found) {
  launcher::LinkConnections c;
  c.watch = std::make_unique<launcher::TcpLinkStore>(connectTo(host, port));
  c.watch_fd = c.watch->startWait({launcher::roundKeys(o, 0).stop()});
  c.publisher = std::make_unique<launcher::TcpLinkStore>(connectTo(host, port));
  c.publisher->setTimeout(o.timeouts.request);
  c.keep_alive = std::make_unique<launcher::TcpLinkStore>(connectTo(host, port));
  launcher::LinkOptions options;
  options.machines = options.max_machines = o.num_machines;
  std::vector<std::string> tokens(static_cast<size_t>(o.num_machines));
  for (const auto& m : joined.machines) tokens[static_cast<size_t>(m.machine_rank)] = m.presence;
  options.present = [&o, tokens](int m) { return o.present(tokens[static_cast<size_t>(m)]); };
  if (loss.host) {
    options.keep_alives = [&loss, keys = launcher::roundKeys(o, 0)](int m) {
      return loss.host->keepAlives(keys.alive(m));
    };
  }
  launcher::JobLink link(std::move(c), o, 0, 0, "m0", options);
  pollfd heard{link.fd(), POLLIN, 0};
  ::poll(&heard, 1, -1);
  found = nowNs();
  link.takeEvents();
  endAndMeetAgain(client, o, joined, loss,
                  {[&] { return link.lostMachines(); },
                   [&] { return launcher::presentRegistrations(client, o, 1); }},
                  true);
}

// One simulated machine of the store's round: its presence parked, then, at the gate, the round
// (`onPlaced` once it is placed); with --loss, what follows it (followAsMember, followAsMaster:
// `found` is the master's).
void storeMachine(const std::string& host, int port, launcher::GroupSettings o, int index,
                  Gate& gate, Placed& placed, Loss& loss, const std::function<void()>& onPlaced,
                  std::atomic<int64_t>* found = nullptr) {
  auto client = connectTo(host, port);
  client->park({launcher::JobKeys(o.run_id).presence(o.presence)});
  gate.arrive();
  gate.await();
  auto r = launcher::rendezvous(*client, o, {});
  placed.at(nowNs());
  const bool ok = r && r->world_size == o.num_machines;
  if (!ok) {
    std::fprintf(stderr, "%s: %s\n", o.host.c_str(), r ? "wrong world size" : r.error().c_str());
    ++placed.failed;
  }
  onPlaced();
  if (!ok || !loss.on) return;
  if (found) return followAsMaster(host, port, *client, o, *r, loss, *found);
  if (followAsMember(host, port, *client, o, *r, index, loss)) loss.keep(std::move(client));
}

// The children: one process of `count` machines from `first` on. With --loss: at "loss" the
// silent machine stops; the process prints the next round's placements too.
int storeAgents(const std::string& host, int port, const std::string& run, int machines, int first,
                int count, bool lossPhase) {
  haveDescriptors((lossPhase ? 3ull : 1ull) * static_cast<uint64_t>(count), "an agent process",
                  "use more --procs");
  Gate gate;
  Placed placed;
  Loss loss;
  loss.on = lossPhase;
  std::atomic<int> unplaced{count};
  std::thread go = followDriver(gate, count, lossPhase ? &loss.silent_ns : nullptr);
  onThreads(count, [&](int i) {
    storeMachine(host, port, storeSettings(run, machines, first + i, lossPhase), first + i, gate,
                 placed, loss, [&] {
                   if (--unplaced == 0) placed.print();
                 });
  });
  go.join();
  if (lossPhase) loss.again.print();
  return placed.failed || loss.again.failed ? 1 : 0;
}

// CPU seconds this process used so far.
double cpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The server's child: the store an agent hosts, with machine 0's agent (the master) in it. With
// --loss: between the driver's "idle" and "loss" its CPU per second (the idle group's cost), and
// the instant its link found the loss.
int storeServer(const std::string& run, int machines, bool lossPhase, bool readOverTcp) {
  haveDescriptors((lossPhase ? 3ull : 1ull) * static_cast<uint64_t>(machines), "the store's server",
                  "each machine holds one connection to it (its presence parked on it), three in "
                  "the loss phase (its watch and keep-alives too)");
  store::TcpStoreServerOptions options;
  options.host = "0.0.0.0";
  options.port = 0;
  options.tracked_wait_prefix = launcher::StoreRounds::trackedWaitPrefix(run);
  options.presence_key_prefix = launcher::StoreRounds::presenceWaitPrefix(run);
  auto keepAlives = std::make_shared<launcher::KeepAliveBoard>();
  options.observed.push_back(keepAlives->observer(run));
  auto server = store::TcpStoreServer::start(options);
  std::printf("port=%d\n", server->port());
  std::fflush(stdout);
  launcher::TcpStoreHost host(*server, keepAlives);
  launcher::GroupSettings o = storeSettings(run, machines, 0, lossPhase);
  o.present = [&host, &o](const std::string& token) {
    return host.waiting(launcher::JobKeys(o.run_id).presence(token), 2s);
  };
  Gate gate;
  Placed placed;
  Loss loss;
  loss.on = lossPhase;
  std::atomic<int64_t> found{0};
  double idleCpuPerS = 0;
  store::TcpStoreServerStats before;
  std::thread go([&] {
    gate.awaitArrivals(1);
    std::printf("ready\n");
    std::fflush(stdout);
    if (!readUntil("go")) std::exit(1);
    before = server->stats();
    gate.open();
    if (!lossPhase) return;
    if (!readUntil("idle")) std::exit(1);
    const double cpu0 = cpuSeconds();
    const int64_t t0 = nowNs();
    if (!readUntil("loss")) std::exit(1);
    idleCpuPerS = (cpuSeconds() - cpu0) / (1e-9 * double(nowNs() - t0));
  });
  if (!readOverTcp) loss.host = &host;
  storeMachine(
      "127.0.0.1", server->port(), o, 0, gate, placed, loss, [&] { placed.print(); },
      lossPhase ? &found : nullptr);
  go.join();
  if (lossPhase) {
    std::printf("found found_ns=%lld idle_cpu_per_s=%.3f\n", static_cast<long long>(found.load()),
                idleCpuPerS);
    loss.again.print();
  }
  readUntil("\x04never");  // until the driver closes stdin: every machine is placed
  const auto after = server->stats();
  std::printf("server requests=%llu bytes=%llu woken=%llu cpu_s=%.2f peak_kib=%ld\n",
              static_cast<unsigned long long>(after.requests - before.requests),
              static_cast<unsigned long long>(after.bytes_received + after.bytes_sent -
                                              before.bytes_received - before.bytes_sent),
              static_cast<unsigned long long>(after.waits_woken - before.waits_woken), cpuSeconds(),
              peakKib());
  std::fflush(stdout);
  return placed.failed || loss.again.failed ? 1 : 0;
}

// A child process with pipes to its stdin and from its stdout.
struct Child {
  pid_t pid = -1;
  FILE* in = nullptr;   // its stdin
  FILE* out = nullptr;  // its stdout

  static Child start(const std::vector<std::string>& argv) {
    int to[2], from[2];
    if (::pipe(to) || ::pipe(from)) die("pipe: " + std::string(std::strerror(errno)));
    Child c;
    c.pid = ::fork();
    if (c.pid == 0) {
      ::dup2(to[0], 0), ::dup2(from[1], 1);
      ::close(to[0]), ::close(to[1]), ::close(from[0]), ::close(from[1]);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv("/proc/self/exe", args.data());
      _exit(127);
    }
    ::close(to[0]), ::close(from[1]);
    c.in = ::fdopen(to[1], "w");
    c.out = ::fdopen(from[0], "r");
    return c;
  }
  // The next line it prints that starts with `word` (dies when it ends first).
  std::string expect(const char* word) const {
    char line[512];
    while (std::fgets(line, sizeof line, out)) {
      if (!std::strncmp(line, word, std::strlen(word))) return line;
    }
    die(std::string("a child ended before it said '") + word + "'");
  }
  void say(const char* line) const {
    std::fputs(line, in);
    std::fflush(in);
  }
  int finish() {
    if (in) std::fclose(in), in = nullptr;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// "key=value" fields of a child's line.
double field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  if (at == std::string::npos) die("no " + key + " in: " + line);
  return std::strtod(line.c_str() + at + key.size() + 1, nullptr);
}

// Splits N-1 machines (1..N-1; machine 0 is elsewhere) over `procs` processes.
std::vector<std::pair<int, int>> shares(int from, int machines, int procs) {
  std::vector<std::pair<int, int>> out;
  const int n = machines - from;
  for (int p = 0; p < procs; ++p) {
    const int first = from + n * p / procs, last = from + n * (p + 1) / procs;
    if (last > first) out.push_back({first, last - first});
  }
  return out;
}

// Says "go" to every child once all are ready; the instant it did.
int64_t release(std::vector<Child>& children) {
  for (auto& c : children) c.expect("ready");
  const int64_t t0 = nowNs();
  for (auto& c : children) c.say("go\n");
  return t0;
}

// Every child's next "done" line: the last placement among them; dies when a machine failed
// (`when`: in which round, for the message).
int64_t lastPlaced(std::vector<Child>& children, const std::string& when) {
  int64_t last = 0;
  uint64_t failed = 0;
  for (auto& c : children) {
    const std::string done = c.expect("done");
    last = std::max(last, static_cast<int64_t>(field(done, "placed_ns")));
    failed += static_cast<uint64_t>(field(done, "failed"));
  }
  if (failed) die(std::to_string(failed) + " machines failed " + when);
  return last;
}

// The loss phase's driver side: the group idles `idle` (the server measures its CPU), then one
// machine goes silent; prints the row once every machine met again.
void driveLoss(std::vector<Child>& children, int machines, const char* label) {
  constexpr auto idle = 5s;
  children[0].say("idle\n");
  std::this_thread::sleep_for(idle);
  const int64_t silent = nowNs();
  for (auto& c : children) c.say("loss\n");
  const std::string found = children[0].expect("found");
  const int64_t last = lastPlaced(children, "to meet again after the loss");
  std::printf("%s %d %.3f %.3f %.3f\n", label, machines,
              1e-9 * (field(found, "found_ns") - double(silent)), 1e-9 * double(last - silent),
              field(found, "idle_cpu_per_s"));
}

int driveStore(const std::string& self, int machines, int procs, bool loss, bool tcpReads) {
  const std::string run = "scale-" + std::to_string(::getpid());
  const std::string n = std::to_string(machines), lossArg = loss ? "1" : "0";
  std::vector<Child> children;
  children.push_back(Child::start({self, "store-server", run, n, tcpReads ? "tcp" : lossArg}));
  const std::string port =
      std::to_string(static_cast<int>(field(children[0].expect("port="), "port")));
  int i = 0;
  for (auto [first, count] : shares(1, machines, procs)) {
    const std::string host = "127.0.0." + std::to_string(2 + i++);
    children.push_back(Child::start({self, "store-agents", host, port, run, n,
                                     std::to_string(first), std::to_string(count), lossArg}));
  }
  const int64_t t0 = release(children);
  const int64_t last = lastPlaced(children, "in the round");
  uint64_t failed = 0;
  if (loss) driveLoss(children, machines, tcpReads ? "store-loss-tcp-reads" : "store-loss");
  for (size_t c = 1; c < children.size(); ++c) failed += children[c].finish() != 0;
  std::fclose(children[0].in), children[0].in = nullptr;
  const std::string server = children[0].expect("server");
  failed += children[0].finish() != 0;
  if (failed) die(std::to_string(failed) + " processes failed");
  if (loss) return 0;
  const double m = machines;
  std::printf("store %d %.3f %.1f %.0f %.2f %.2f %.1f\n", machines, 1e-9 * double(last - t0),
              field(server, "requests") / m, field(server, "bytes") / m, field(server, "woken") / m,
              field(server, "cpu_s"), field(server, "peak_kib") / 1024.0);
  return 0;
}

// A machine of the round-end bench: leaderless (on etcd), one restart, the group may shrink by one.
launcher::GroupSettings etcdEndSettings(const std::string& run, int machines, int index) {
  launcher::GroupSettings o;
  o.run_id = run;
  o.num_machines = machines;
  o.min_machines = machines - 1;
  o.max_restarts = 1;
  o.leaderless = true;
  o.host = "m" + std::to_string(index);
  o.timeouts.close = 600s;
  return o;
}

launcher::EtcdOptions etcdOptions(const std::string& endpoints) {
  launcher::EtcdOptions o;
  auto parsed = launcher::parseEtcdEndpoints(endpoints);
  if (!parsed) die("--endpoints: " + parsed.error());
  o.endpoints = *parsed;
  o.timeout = 600s;
  o.attempt_timeout = 30s;
  return o;
}

// The children of the etcd round: `count` machines from `first` on, each with its lease.
int etcdAgents(const std::string& endpoints, const std::string& run, int machines, int first,
               int count) {
  haveDescriptors(3ull * static_cast<uint64_t>(count), "an agent process", "use more --procs");
  launcher::EtcdMeeting s;
  s.root = "accel-scale/";
  s.job.run_id = run;
  s.job.min_machines = s.job.num_machines = machines;
  s.job.timeouts.join = 600s;
  Gate gate;
  Placed placed;
  uint64_t bytes0 = 0, events0 = 0;  // what the connecting moved
  std::thread go([&] {
    gate.awaitArrivals(count);
    bytes0 = launcher::etcdTraffic().bytes, events0 = launcher::etcdTraffic().events;
    std::printf("ready\n");
    std::fflush(stdout);
    if (!readUntil("go")) std::exit(1);
    gate.open();
  });
  onThreads(count, [&](int i) {
    const std::string name = "m" + std::to_string(first + i);
    bool arrived = false;
    try {
      launcher::EtcdOptions o = etcdOptions(endpoints);
      o.first_endpoint = static_cast<size_t>(first + i);  // spread, as agents are
      launcher::EtcdClient client(o);
      launcher::EtcdMeeting mine = s;
      mine.lease = client.grantLease(60s);
      const uint64_t before = client.requests();
      gate.arrive(), arrived = true;
      gate.await();
      auto r = launcher::meetOnEtcd(client, mine, {}, {name, name, "", 1});
      placed.at(nowNs());
      placed.requests +=
          client.requests() - before + static_cast<uint64_t>(r ? r->watches + r->checks : 0);
      if (!r || r->world_size != machines || r->machine_rank < 0) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), r ? "not placed" : r.error().c_str());
        ++placed.failed;
      }
    } catch (const std::exception& e) {  // etcd refused or dropped it: said, and counted
      std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
      ++placed.failed;
      if (!arrived) gate.arrive();
    }
  });
  go.join();
  std::printf("traffic bytes=%llu events=%llu\n",
              static_cast<unsigned long long>(launcher::etcdTraffic().bytes - bytes0),
              static_cast<unsigned long long>(launcher::etcdTraffic().events - events0));
  placed.print();
  return placed.failed ? 1 : 0;
}

// What the etcd children said at their end, summed: the last placement (or decision), requests,
// bytes and watch events; dies when a machine or process failed.
struct EtcdTally {
  int64_t last = 0;
  double requests = 0, bytes = 0, events = 0;
};
EtcdTally tallyEtcd(std::vector<Child>& children) {
  EtcdTally t;
  int failed = 0;
  for (auto& c : children) {
    const std::string traffic = c.expect("traffic");
    t.bytes += field(traffic, "bytes"), t.events += field(traffic, "events");
    const std::string done = c.expect("done");
    t.last = std::max(t.last, static_cast<int64_t>(field(done, "placed_ns")));
    t.requests += field(done, "requests");
    failed += static_cast<int>(field(done, "failed")) + (c.finish() != 0);
  }
  if (failed) die(std::to_string(failed) + " machines or processes failed");
  return t;
}

int driveEtcd(const std::string& self, const std::string& endpoints, int machines, int procs) {
  const std::string run = "scale-" + std::to_string(::getpid());
  std::vector<Child> children;
  for (auto [first, count] : shares(0, machines, procs)) {
    children.push_back(Child::start({self, "etcd-agents", endpoints, run, std::to_string(machines),
                                     std::to_string(first), std::to_string(count)}));
  }
  const int64_t t0 = release(children);
  const EtcdTally t = tallyEtcd(children);
  std::printf("etcd %d %.3f %.1f %.0f %.2f\n", machines, 1e-9 * double(t.last - t0),
              t.requests / machines, t.bytes / machines, t.events / machines);
  return 0;
}

// The etcd loss phase, shared by a process's machines.
struct EtcdLoss {
  std::atomic<int64_t> silent_ns{0};  // the instant the driver said "loss"
  std::atomic<int64_t> heard_ns{0};   // the first link here that told of it
  Placed again;
  void heard(int64_t ns) {
    int64_t seen = heard_ns.load();
    while ((seen == 0 || ns < seen) && !heard_ns.compare_exchange_weak(seen, ns)) {
    }
  }
};

// The job's settings for an etcd machine of the loss phase: the group may go on without one, once.
launcher::EtcdMeeting etcdLossMeeting(const std::string& run, int machines) {
  launcher::EtcdMeeting s;
  s.root = "accel-scale/";
  s.job.run_id = run;
  s.job.num_machines = machines;
  s.job.min_machines = machines - 1;
  s.job.max_restarts = 1;
  s.job.leaderless = true;
  s.job.timeouts.join = 600s;
  return s;
}

// The round as every backend's, for RoundCloser (members: what this agent read of them).
launcher::RendezvousResult asJoined(const launcher::EtcdRound& r, int maxRestarts) {
  launcher::RendezvousResult j;
  j.machine_rank = r.machine_rank, j.rank_offset = r.rank_offset;
  j.size = r.size, j.world_size = r.world_size;
  j.restart_count = r.restart_count, j.max_restarts = maxRestarts;
  for (size_t m = 0; m < r.members.size(); ++m) {
    const auto& e = r.members[m];
    j.machines.push_back(
        {e.host, e.token, e.address, 1, static_cast<int>(m), static_cast<int>(m), 0});
  }
  return j;
}

// The silent machine: its lease renewed by hand every interval until the loss, then no more (its
// process stays, its connections open: a machine cut off).
void renewUntilSilent(launcher::EtcdClient& client, int64_t lease, const EtcdLoss& loss,
                      std::chrono::milliseconds interval) {
  while (!loss.silent_ns.load()) {
    client.keepAlive(lease);
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(interval, 50ms));
  }
}

// Any other machine after round 0: what EtcdRounds::watch writes, its link until it tells of the
// loss, the round's end, the link stopped, the next round.
void followOnEtcd(launcher::EtcdClient& client, const launcher::EtcdOptions& o,
                  launcher::EtcdMeeting mine, launcher::EtcdMember me, const launcher::EtcdRound& r,
                  const launcher::EtcdLease& lease, EtcdLoss& loss) {
  const launcher::JobKeys keys(mine.job.run_id, mine.root);
  client.put(keys.round(0).started(r.machine_rank), "1");
  client.put(keys.openRound(), "1");
  client.put(keys.restarts(), "0");
  launcher::EtcdLinkOptions lo;
  lo.etcd = o, lo.meeting = mine, lo.round = 0, lo.machine_rank = r.machine_rank;
  lo.machines = r.size, lo.places = r.places, lo.seen_at = r.seen_at, lo.window = lease.ttl();
  lo.answered = [&lease](const std::string& endpoint) { return lease.answeredBy(endpoint); };
  launcher::EtcdLink link(lo);
  pollfd told{link.fd(), POLLIN, 0};
  ::poll(&told, 1, -1);
  loss.heard(nowNs());
  link.takeEvents();
  launcher::EtcdStore records(o, "accel-scale");
  launcher::AttemptReport last;
  launcher::RoundCloser closer(mine.job, false);
  const auto d = closer.close(records, {}, asJoined(r, mine.job.max_restarts), last, false,
                              {[&link] { return link.lostMachines(); }, [] { return 0; }});
  link.stop();
  me.previous_rank = r.machine_rank;
  auto again = d.restart ? launcher::meetOnEtcd(client, mine, d.next(0), me)
                         : Expected<launcher::EtcdRound>(makeError(d.why));
  loss.again.at(nowNs());
  if (!again || again->size != mine.job.num_machines - 1 || again->machine_rank < 0) {
    std::fprintf(stderr, "%s, round 1: %s\n", me.host.c_str(),
                 again ? "not placed among N-1" : again.error().c_str());
    ++loss.again.failed;
  }
}

// The loss phase's children: `count` machines from `first` on.
int etcdLossAgents(const std::string& endpoints, const std::string& run, int machines, int first,
                   int count) {
  haveDescriptors(10ull * static_cast<uint64_t>(count), "an agent process", "use more --procs");
  const launcher::EtcdMeeting s = etcdLossMeeting(run, machines);
  Gate gate;
  Placed placed;
  EtcdLoss loss;
  std::atomic<int> unplaced{count};
  std::thread go = followDriver(gate, count, &loss.silent_ns);
  onThreads(count, [&](int i) {
    const int index = first + i;
    const std::string name = "m" + std::to_string(index);
    launcher::EtcdOptions o = etcdOptions(endpoints);
    o.first_endpoint = static_cast<size_t>(index);
    launcher::EtcdClient client(o);
    const bool silent = index == machines - 1;
    std::unique_ptr<launcher::EtcdLease> lease;
    launcher::EtcdMeeting mine = s;
    if (silent) {
      mine.lease = client.grantLease(std::chrono::duration_cast<std::chrono::seconds>(
          s.job.timeouts.keep_alive_interval * s.job.timeouts.keep_alive_misses));
    } else {
      lease = std::make_unique<launcher::EtcdLease>(launcher::realEtcd(), o, s.job.timeouts);
      mine.lease = lease->id();
    }
    gate.arrive();
    gate.await();
    const launcher::EtcdMember me{name, name, "", 1};
    auto r = launcher::meetOnEtcd(client, mine, {}, me);
    placed.at(nowNs());
    if (--unplaced == 0) placed.print();
    if (!r || r->machine_rank < 0) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), r ? "not placed" : r.error().c_str());
      ++placed.failed;
      return;
    }
    if (silent)
      return renewUntilSilent(client, mine.lease, loss, s.job.timeouts.keep_alive_interval);
    try {
      followOnEtcd(client, o, mine, me, *r, *lease, loss);
    } catch (const std::exception& e) {  // etcd did not answer it in time: said, and counted
      std::fprintf(stderr, "%s, after round 0: %s\n", name.c_str(), e.what());
      ++loss.again.failed;
    }
  });
  go.join();
  std::printf("found found_ns=%lld\n", static_cast<long long>(loss.heard_ns.load()));
  loss.again.print();
  return placed.failed || loss.again.failed ? 1 : 0;
}

// CPU seconds the processes `pids` used so far (from /proc).
double cpuOf(const std::vector<long>& pids) {
  double total = 0;
  for (long pid : pids) {
    FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (!f) continue;
    char buf[2048];
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char* after = std::strrchr(buf, ')');  // fields 3.. follow the command's name
    unsigned long utime = 0, stime = 0;
    if (after && std::sscanf(after + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                             &utime, &stime) == 2) {
      total += static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  return total;
}

// "P,P,...".
std::vector<long> pidList(const std::string& text) {
  std::vector<long> pids;
  for (const char* p = text.c_str(); *p;) {
    char* end = nullptr;
    pids.push_back(std::strtol(p, &end, 10));
    if (end == p) die("--server-pids: '" + text + "' is not P,P,...");
    p = *end ? end + 1 : end;
  }
  return pids;
}

int driveEtcdLoss(const std::string& self, const std::string& endpoints, int machines, int procs,
                  const std::vector<long>& serverPids) {
  const std::string run = "scale-loss-" + std::to_string(::getpid());
  std::vector<Child> children;
  for (auto [first, count] : shares(0, machines, procs)) {
    children.push_back(
        Child::start({self, "etcd-loss-agents", endpoints, run, std::to_string(machines),
                      std::to_string(first), std::to_string(count)}));
  }
  release(children);
  lastPlaced(children, "in the round");
  const double cpu0 = cpuOf(serverPids);
  const int64_t idle0 = nowNs();
  std::this_thread::sleep_for(5s);
  const double idleCpuPerS = (cpuOf(serverPids) - cpu0) / (1e-9 * double(nowNs() - idle0));
  const int64_t silent = nowNs();
  for (auto& c : children) c.say("loss\n");
  int64_t heard = 0;
  for (auto& c : children) {
    const int64_t h = static_cast<int64_t>(field(c.expect("found"), "found_ns"));
    if (h && (!heard || h < heard)) heard = h;
  }
  const int64_t last = lastPlaced(children, "to meet again after the loss");
  int failed = 0;
  for (auto& c : children) failed += c.finish() != 0;
  if (failed) die(std::to_string(failed) + " processes failed");
  std::printf("etcd-loss %d %.3f %.3f %.3f\n", machines, 1e-9 * double(heard - silent),
              1e-9 * double(last - silent), idleCpuPerS);
  return 0;
}

// The renewals' children: `count` leases (machines from `first` on), renewed over gRPC or the
// gateway (`via`), until the driver says "stop".
int etcdLeases(const std::string& endpoints, int first, int count, const std::string& via) {
  haveDescriptors(4ull * static_cast<uint64_t>(count), "a lease process", "use more --procs");
  launcher::RoundTimeouts timeouts;
  std::vector<std::unique_ptr<launcher::EtcdLease>> leases;
  for (int i = 0; i < count; ++i) {
    launcher::EtcdOptions o = etcdOptions(endpoints);
    o.first_endpoint = static_cast<size_t>(first + i);  // spread, as agents are
    o.renew_over_grpc = via == "grpc";
    leases.push_back(std::make_unique<launcher::EtcdLease>(launcher::realEtcd(), o, timeouts));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  readUntil("stop");  // (or stdin closed)
  int lost = 0;
  for (const auto& l : leases) lost += l->lost().has_value();
  if (lost) std::fprintf(stderr, "%d leases were lost while idle (etcd overloaded)\n", lost);
  return 0;
}

// The members' CPU per second while `machines` leases are renewed `via` gRPC or the gateway.
double renewalsCpu(const std::string& self, const std::string& endpoints, int machines, int procs,
                   const std::vector<long>& serverPids, const std::string& via) {
  std::vector<Child> children;
  for (auto [first, count] : shares(0, machines, procs)) {
    children.push_back(Child::start(
        {self, "etcd-leases", endpoints, std::to_string(first), std::to_string(count), via}));
  }
  for (auto& c : children) c.expect("ready");
  std::this_thread::sleep_for(launcher::RoundTimeouts{}.keep_alive_interval);  // every stream open
  const double cpu0 = cpuOf(serverPids);
  const int64_t t0 = nowNs();
  std::this_thread::sleep_for(5s);
  const double perS = (cpuOf(serverPids) - cpu0) / (1e-9 * double(nowNs() - t0));
  for (auto& c : children) c.say("stop\n");  // (each child's stdin is open in those after it)
  int failed = 0;
  for (auto& c : children) failed += c.finish() != 0;
  if (failed) die(std::to_string(failed) + " processes failed");
  return perS;
}

int driveEtcdRenewals(const std::string& self, const std::string& endpoints, int machines,
                      int procs, const std::vector<long>& serverPids) {
  if (serverPids.empty()) die("etcd-renewals needs --server-pids");
  const double grpc = renewalsCpu(self, endpoints, machines, procs, serverPids, "grpc");
  const double gateway = renewalsCpu(self, endpoints, machines, procs, serverPids, "gateway");
  std::printf("etcd-renewals %d %.3f %.3f\n", machines, grpc, gateway);
  return 0;
}

// The round-end children: `count` machines from `first` on, each with its EtcdStore, end round 0
// (the last machine lost, its stop record published by the driver) and decide.
int etcdEnders(const std::string& endpoints, const std::string& run, int machines, int first,
               int count) {
  haveDescriptors(3ull * static_cast<uint64_t>(count), "an agent process", "use more --procs");
  Gate gate;
  Placed decided;
  uint64_t bytes0 = 0;
  std::thread go([&] {
    gate.awaitArrivals(count);
    bytes0 = launcher::etcdTraffic().bytes;
    std::printf("ready\n");
    std::fflush(stdout);
    if (!readUntil("go")) std::exit(1);
    gate.open();
  });
  onThreads(count, [&](int i) {
    const int index = first + i;
    launcher::GroupSettings o = etcdEndSettings(run, machines, index);
    launcher::EtcdOptions eo = etcdOptions(endpoints);
    eo.first_endpoint = static_cast<size_t>(index);
    launcher::EtcdStore records(eo, "accel-scale");
    launcher::RendezvousResult joined;
    joined.machine_rank = index, joined.rank_offset = index;
    joined.size = joined.world_size = machines;
    joined.max_restarts = o.max_restarts;
    for (int m : {0, 1}) joined.machines.push_back({"m" + std::to_string(m), "", "", 1, m, m, 0});
    const uint64_t before = records.requests();
    gate.arrive();
    gate.await();
    launcher::AttemptReport last;
    launcher::RoundCloser closer(o, false);
    const std::vector<launcher::LostMachine> lost{{machines - 1, "it stopped renewing its lease"}};
    const auto d = closer.close(records, {}, joined, last, false,
                                {[&lost] { return lost; }, [] { return 0; }});
    decided.at(nowNs());
    decided.requests += records.requests() - before;
    if (!d.restart || !last.job_failure) {
      std::fprintf(stderr, "m%d: %s\n", index, d.restart ? "no failure read" : d.why.c_str());
      ++decided.failed;
    }
  });
  go.join();
  std::printf("traffic bytes=%llu events=0\n",
              static_cast<unsigned long long>(launcher::etcdTraffic().bytes - bytes0));
  decided.print();
  return decided.failed ? 1 : 0;
}

int driveEtcdEnd(const std::string& self, const std::string& endpoints, int machines, int procs) {
  const std::string run = "scale-end-" + std::to_string(::getpid());
  {  // the loss, as the first link to hear of it publishes it
    launcher::EtcdStore s(etcdOptions(endpoints), "accel-scale");
    const launcher::GroupSettings o = etcdEndSettings(run, machines, 0);
    const std::string last = "m" + std::to_string(machines - 1);
    s.set(launcher::roundKeys(o, 0).stop(),
          launcher::encodeRoundStop(launcher::RoundStop::failed(launcher::lostFailure(
              {machines - 1, "it stopped renewing its lease"}, last, "its lease expired"))));
  }
  std::vector<Child> children;
  for (auto [first, count] : shares(0, machines - 1, procs)) {  // the lost one ends nothing
    children.push_back(Child::start({self, "etcd-enders", endpoints, run, std::to_string(machines),
                                     std::to_string(first), std::to_string(count)}));
  }
  const int64_t t0 = release(children);
  const EtcdTally t = tallyEtcd(children);
  std::printf("etcd-end %d %.3f %.1f %.0f\n", machines, 1e-9 * double(t.last - t0),
              t.requests / (machines - 1), t.bytes / (machines - 1));
  return 0;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: rdzv_scale_bench store --machines N [--procs P] [--loss [--tcp-reads]]\n"
               "       rdzv_scale_bench etcd --endpoints HOST:PORT,... --machines N [--procs P] "
               "[--loss [--server-pids P,P,P]]\n"
               "       rdzv_scale_bench etcd-renewals --endpoints HOST:PORT,... --machines N "
               "[--procs P] --server-pids P,P,P\n"
               "       rdzv_scale_bench etcd-end --endpoints HOST:PORT,... --machines N "
               "[--procs P]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const std::string mode = argv[1];
  auto arg = [&](int i) { return i < argc ? std::string(argv[i]) : (usage(), std::string()); };
  if (mode == "store-server") {
    return storeServer(arg(2), std::stoi(arg(3)), arg(4) != "0", arg(4) == "tcp");
  }
  if (mode == "store-agents") {
    return storeAgents(arg(2), std::stoi(arg(3)), arg(4), std::stoi(arg(5)), std::stoi(arg(6)),
                       std::stoi(arg(7)), arg(8) == "1");
  }
  if (mode == "etcd-loss-agents") {
    return etcdLossAgents(arg(2), arg(3), std::stoi(arg(4)), std::stoi(arg(5)), std::stoi(arg(6)));
  }
  if (mode == "etcd-leases")
    return etcdLeases(arg(2), std::stoi(arg(3)), std::stoi(arg(4)), arg(5));
  if (mode == "etcd-enders") {
    return etcdEnders(arg(2), arg(3), std::stoi(arg(4)), std::stoi(arg(5)), std::stoi(arg(6)));
  }
  if (mode == "etcd-agents") {
    return etcdAgents(arg(2), arg(3), std::stoi(arg(4)), std::stoi(arg(5)), std::stoi(arg(6)));
  }
  int machines = 0, procs = 4;
  bool loss = false, tcpReads = false;
  std::string endpoints;
  std::vector<long> serverPids;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--machines")
      machines = std::stoi(arg(++i));
    else if (a == "--procs")
      procs = std::stoi(arg(++i));
    else if (a == "--endpoints")
      endpoints = arg(++i);
    else if (a == "--loss")
      loss = true;
    else if (a == "--tcp-reads")
      tcpReads = true;
    else if (a == "--server-pids")
      serverPids = pidList(arg(++i));
    else
      usage();
  }
  if (machines < 2 || procs < 1) usage();
  if (mode == "store") return driveStore(argv[0], machines, procs, loss, tcpReads);
  if (mode == "etcd" && !endpoints.empty() && loss) {
    return driveEtcdLoss(argv[0], endpoints, machines, procs, serverPids);
  }
  if (mode == "etcd" && !endpoints.empty()) return driveEtcd(argv[0], endpoints, machines, procs);
  if (mode == "etcd-renewals" && !endpoints.empty()) {
    return driveEtcdRenewals(argv[0], endpoints, machines, procs, serverPids);
  }
  if (mode == "etcd-end" && !endpoints.empty()) {
    return driveEtcdEnd(argv[0], endpoints, machines, procs);
  }
  usage();
}
