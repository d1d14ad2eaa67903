#include "launcher/launch.h"

#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "accel/error.h"
#include "config/config_file.h"
#include "launcher/agent_rendezvous.h"
#include "launcher/console.h"
#include "launcher/cpu_affinity.h"
#include "launcher/job_link.h"
#include "launcher/launch_plan.h"
#include "launcher/net_check.h"
#include "launcher/ports.h"
#include "launcher/subprocess_posix.h"
#include "launcher/supervisor.h"
#include "launcher/worker_env.h"
#include "libaccel/common/env_names.h"
#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/tcp_store_server.h"
#include "probes/gpu_probe.h"

namespace accel::launcher {

// The vocabulary of the machine's environment comes from probes/.
using probes::countUsableGpus;
using probes::processEnvironment;
namespace {

void notice(const LaunchPlan& plan, const std::string& text) {
  if (plan.quiet) return;
  std::string line = "accel: " + text + "\n";
  writeAll(2, line.data(), line.size());
}

std::string shellQuote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
          std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The worker slot a dry run shows for a local rank (port 0: the agent binds a free port when it
// starts; the dry run cannot know which).
WorkerSlot dryRunSlot(const LaunchPlan& plan, int localRank) {
  return WorkerSlot{
      localRank, 0, plan.master_port.value_or(0),
      plan.exec_in_place ? "" : "<run dir>/attempt_0/" + std::to_string(localRank) + "/error.json"};
}

// The local ranks this machine starts: all of them, or the one this scheduler task becomes.
std::pair<int, int> dryRunLocalRanks(const LaunchPlan& plan) {
  return plan.exec_in_place ? std::pair{plan.exec_local_rank, plan.exec_local_rank + 1}
                            : std::pair{0, plan.local_world_size};
}

// A machine ranked by arrival does not know its rank before the rendezvous: the dry run shows
// it as machine 1.
LaunchPlan dryRunView(const LaunchPlan& plan) {
  LaunchPlan view = plan;
  if (view.node_rank < 0) {
    view.node_rank = 1;
    view.rank_offset = view.local_world_size;
    view.notices.push_back(
        "this machine's rank comes from the order in which the machines join; the dry run shows it "
        "as machine 1");
  }
  return view;
}

void printDryRun(const LaunchPlan& plan) {
  std::string out;
  const auto [first, last] = dryRunLocalRanks(plan);
  for (const auto& text : plan.notices) out += "notice: " + text + "\n";
  for (int lr = first; lr < last; ++lr) {
    out += "rank " + std::to_string(globalRank(plan, lr)) + " (local rank " + std::to_string(lr) +
           "):\n  command:";
    for (const auto& a : plan.argv) out += " " + shellQuote(a);
    if (static_cast<size_t>(lr) < plan.rank_cpus.size())
      out += "\n  cpus: " + formatCpuList(plan.rank_cpus[lr]);
    out += "\n  environment (on top of the inherited one):\n";
    for (const auto& kv : launcherVariables(plan, dryRunSlot(plan, lr))) out += "    " + kv + "\n";
  }
  writeAll(1, out.data(), out.size());
}

// The dry run as one JSON object: {"ranks": [{"rank", "local_rank", "command", "env"}], "notices"}.
void printDryRunJson(const LaunchPlan& plan) {
  nlohmann::json ranks = nlohmann::json::array();
  const auto [first, last] = dryRunLocalRanks(plan);
  for (int lr = first; lr < last; ++lr) {
    ranks.push_back({{"rank", globalRank(plan, lr)},
                     {"local_rank", lr},
                     {"command", plan.argv},
                     {"env", launcherVariableMap(plan, dryRunSlot(plan, lr))}});
  }
  const std::string out = nlohmann::json{{"ranks", ranks},
                                         {"notices", plan.notices},
                                         {"world_size", plan.world_size},
                                         {"num_machines", plan.num_machines},
                                         {"machine_rank", plan.node_rank}}
                              .dump(1) +
                          "\n";
  writeAll(1, out.data(), out.size());
}

// Deletes a directory tree the agent created (depth first, without following links).
void removeTree(const std::string& dir) {
  ::nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

std::string hostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// A connection to the master agent's store (throws accel::Error when it cannot be made in time).
std::unique_ptr<store::TcpStoreClient> connectToMaster(const LaunchPlan& plan, int storePort,
                                                       std::chrono::milliseconds connectTimeout) {
  store::TcpStoreClientOptions options;
  options.host = plan.master_addr;
  options.port = storePort;
  options.connect_timeout = connectTimeout;
  return std::make_unique<store::TcpStoreClient>(options);
}

// The master, after the rendezvous: until all `machines` agents' failure watches are parked on
// its store (they were sent before each registration, so this takes a moment at most). The
// exit barrier's "every other agent is gone" relies on it. False if they never all were.
bool awaitWatches(const store::TcpStoreServer& server, int machines,
                  std::chrono::milliseconds timeout) {
  return server.awaitStats(
      [machines](const store::TcpStoreServerStats& st) {
        return st.tracked_waiters >= static_cast<uint64_t>(machines);
      },
      timeout);
}

// Connects this agent to the master's store and joins the rendezvous of the machines.
Expected<RendezvousResult> joinMachines(const LaunchPlan& plan, int storePort,
                                        const std::string& localAddress, RendezvousOptions& rdzv,
                                        std::unique_ptr<store::TcpStoreClient>& client) {
  const std::string address = plan.master_addr + ":" + std::to_string(storePort);
  try {
    client = connectToMaster(plan, storePort, plan.rdzv_timeout);
  } catch (const Error& e) {
    return makeError(std::string("cannot reach the master agent (machine_rank 0): ") + e.what());
  }
  // rdzv.run_id keeps its default: the store belongs to this job alone, and the server's tracked
  // failure key (below) is computed from the same default.
  rdzv.num_machines = plan.num_machines;
  rdzv.requested_machine_rank = plan.node_rank;
  rdzv.local_world_size = plan.local_world_size;
  rdzv.host = hostName();
  rdzv.address = localAddress;
  rdzv.store_address = address;
  rdzv.timeout = plan.rdzv_timeout;
  rdzv.progress = [&plan](const std::string& status) { notice(plan, "rendezvous: " + status); };
  auto result = rendezvous(*client, rdzv);
  if (!result) return result;
  if (result->world_size != plan.world_size) {
    return makeError(
        "the machines disagree on the job's size: this machine expects num_processes " +
        std::to_string(plan.world_size) + " but the machines that joined run " +
        std::to_string(result->world_size) + " processes in total");
  }
  return result;
}

int jobExitCode(const AttemptReport& last) {
  if (last.hang) return kHungExitCode;
  if (last.remote_culprit) return last.remote_culprit->exit_code;
  if (last.culprit) return last.workers[*last.culprit].exit_code;
  if (last.agent_signal) return 128 + last.agent_signal;
  return 0;
}

// An agent of torchrun's elastic command line that hosts the store only because the endpoint is
// this machine (no is_host=): another agent here may already listen on the port.
bool guessedStoreHost(const LaunchPlan& plan) {
  return plan.rank_by_arrival && !plan.store_host_configured;
}

// torchrun's elastic command line: the agent on the endpoint's host (or the one is_host= in
// --rdzv_conf names) hosts the store as machine 0; the others join it and are ranked by arrival.
void decideStoreHost(LaunchPlan& plan) {
  if (!plan.rank_by_arrival) return;
  const bool host = plan.store_host_configured.value_or(isThisMachine(plan.master_addr));
  const std::string endpoint =
      plan.master_addr + ":" + std::to_string(plan.master_port.value_or(0));
  if (host) {
    plan.node_rank = 0;
    plan.rank_offset = 0;
    plan.notices.push_back(
        "--rdzv_backend c10d: this machine hosts the rendezvous at " + endpoint + " (" +
        (plan.store_host_configured ? "is_host in --rdzv_conf" : "the endpoint is this machine") +
        ") and is machine 0; the others are ranked in the order they join");
  } else {
    plan.notices.push_back(
        "--rdzv_backend c10d: this machine joins the rendezvous at " + endpoint +
        "; its machine rank is the order in which it joins (the endpoint's host is machine 0)");
  }
}

// SLURM names the master by its node name; where that name does not resolve, the controller's
// NodeAddr for it does.
void resolveSchedulerMaster(LaunchPlan& plan) {
  if (!plan.master_addr_from_scheduler || plan.scheduler != "SLURM" || routeTo(plan.master_addr))
    return;
  if (auto addr = slurmNodeAddress(plan.master_addr)) {
    notice(plan, "SLURM node '" + plan.master_addr +
                     "' does not resolve here; using its NodeAddr " + *addr);
    plan.master_addr = *addr;
  }
}

// A rank per scheduler task: become the worker. Returns only when the command cannot be run.
Expected<JobReport> execRank(LaunchPlan& plan, const Environment& parentEnv) {
  const int rank = globalRank(plan, plan.exec_local_rank);
  if (plan.num_machines > 1 && !lookup(parentEnv, "GLOO_SOCKET_IFNAME")) {
    if (auto route = routeTo(plan.master_addr); route && !route->interface.empty()) {
      plan.common_env["GLOO_SOCKET_IFNAME"] = route->interface;
    }
  }
  notice(plan, plan.scheduler.value_or("the scheduler") + ": " + std::to_string(plan.world_size) +
                   " ranks, one per task, on " + std::to_string(plan.num_machines) +
                   " node(s); rank 0 hosts the store at " + plan.master_addr + ":" +
                   std::to_string(*plan.master_port));
  WorkerSlot slot{plan.exec_local_rank, 0, *plan.master_port, ""};
  std::string why = execInPlace(plan.argv, workerEnvironment(plan, slot, parentEnv));
  return makeError("rank " + std::to_string(rank) + ": cannot execute '" + plan.argv[0] +
                   "': " + why);
}

// The interface the workers' Gloo should use: the one that reaches the other machines. A
// non-master reaches the master; the master reaches machine 1 at the address it came from.
std::optional<std::string> workerInterface(const RendezvousResult& joined,
                                           const std::optional<Route>& toMaster) {
  if (joined.machine_rank != 0) {
    if (toMaster && !toMaster->interface.empty()) return toMaster->interface;
    return std::nullopt;
  }
  for (const auto& m : joined.machines) {
    if (m.machine_rank == 0 || m.address.empty()) continue;
    if (auto route = routeTo(m.address); route && !route->interface.empty())
      return route->interface;
  }
  return std::nullopt;
}

// One machine's agent for one job. run() is its lifecycle, phase by phase: host the job's store
// (machine 0), meet the other machines, make the run directory, supervise every attempt,
// report, and the exit barrier. Each phase keeps what it makes in the agent; an error before
// anything is spawned ends the job, and the destructor removes what was made.
class Agent {
 public:
  Agent(LaunchPlan plan, Environment parentEnv)
      : plan_(std::move(plan)),
        parent_env_(std::move(parentEnv)),
        master_(plan_.node_rank == 0),
        store_port_(plan_.master_port.value_or(0)),
        rank_offset_(plan_.rank_offset) {}

  ~Agent() {
    link_.reset();
    if (server_) server_->stop();
    if (temp_run_dir_) removeTree(base_to_remove_);
  }

  Expected<JobReport> run() {
    if (auto ok = useLogDir(); !ok) return std::move(ok).takeError();
    if (auto ok = hostStore(); !ok) return std::move(ok).takeError();
    if (plan_.num_machines > 1) {
      if (auto ok = meetMachines(); !ok) return std::move(ok).takeError();
    }
    if (auto ok = makeRunDir(); !ok) return std::move(ok).takeError();
    if (auto ok = startSupervisor(); !ok) return std::move(ok).takeError();
    JobReport report = superviseAttempts();
    reportOutcome(report);
    if (agent_store_) awaitOtherMachines();
    return report;
  }

 private:
  void say(const std::string& text) {
    if (!plan_.quiet) console_.write(2, "accel: " + text + "\n");
  }

  // --log_dir must be usable before anything starts; the run's own directory in it is made later.
  Expected<void> useLogDir() {
    if (!plan_.log_dir) return {};
    if (auto ok = config::makeDirectories(*plan_.log_dir); !ok)
      return makeError("--log_dir: " + ok.error());
    return {};
  }

  // Machine 0's agent hosts the job's store on the port it keeps for the whole job (port 0: the
  // kernel picks a free one, so nobody else can take it); the others connect to it. Until the
  // supervisor starts, signals keep their default effect: Ctrl-C during the rendezvous simply
  // ends the agent, which has started nothing yet.
  Expected<void> hostStore() {
    if (!master_) return {};
    const store::TcpStoreServerOptions options = storeOptions();
    auto listen = [&] { server_ = store::TcpStoreServer::start(options); };
    try {
      if (guessedStoreHost(plan_)) {
        std::minstd_rand jitter(static_cast<unsigned>(::getpid()));
        auto pause = [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(1 + jitter() % 20));
        };
        if (hostOrJoin(
                listen, [&] { return portHasListener(store_port_); }, pause, 50) ==
            HostOutcome::Join) {
          joinInsteadOfHosting();
          return {};
        }
      } else {
        listen();
      }
    } catch (const Error& e) {
      return makeError(std::string(e.what()) + " (--main_process_ip/--main_process_port)");
    }
    store_port_ = server_->port();
    return {};
  }

  store::TcpStoreServerOptions storeOptions() {
    // With other machines, listen on every address: --main_process_ip may be a name that
    // resolves to loopback here (Debian's 127.0.1.1) yet to the real address elsewhere.
    store::TcpStoreServerOptions options;
    options.host = plan_.num_machines > 1
                       ? (plan_.master_addr.find(':') != std::string::npos ? "::" : "0.0.0.0")
                       : plan_.master_addr;
    options.port = store_port_;
    options.max_connection_input_bytes = plan_.store_connection_input_bytes;
    options.max_total_input_bytes = plan_.store_input_budget_bytes;
    // Every agent parks a WAIT on the failure key while it lives: the exit barrier's liveness.
    options.tracked_wait_key = "/" + failureKey(RendezvousOptions{});
    // The ranks' heartbeats (rank_watch.h) reach the supervisor without a client.
    options.observed_key_prefix = storedHeartbeatPrefix();
    options.on_observed_write = [board = &board_](const std::string& key,
                                                  const std::string& value) {
      board->onWrite(key, value);
    };
    return options;
  }

  // As torch's c10d rendezvous: the port is taken on the endpoint's host, so another agent there
  // hosts the rendezvous; this one joins it and is ranked by arrival.
  void joinInsteadOfHosting() {
    master_ = false;
    plan_.node_rank = -1;
    say("port " + std::to_string(store_port_) +
        " is taken here: another agent on this machine hosts the rendezvous; "
        "joining it (this machine's rank comes from the order in which it joins)");
  }

  Expected<void> meetMachines() {
    // Before anything is spawned: the master must be reachable, from an interface we can name.
    std::optional<Route> toMaster;
    if (!master_) {
      auto reached = waitForListener(plan_.master_addr, store_port_, plan_.rdzv_timeout,
                                     std::chrono::seconds(10),
                                     [this](const std::string& status) { say(status); });
      if (!reached) return makeError(reached.error());
      toMaster = *reached;
    } else if (auto route = routeTo(plan_.master_addr)) {
      toMaster = *route;
    }
    if (auto ok = parkFailureWatch(); !ok) return ok;
    // --local_addr (torchrun's) names this machine's address for the others; else the route's
    // source.
    const std::string localAddress = plan_.local_addr.value_or(toMaster ? toMaster->local_ip : "");
    auto result = joinMachines(plan_, store_port_, localAddress, rdzv_, agent_store_);
    if (!result) return makeError(result.error());
    joined_ = *result;
    plan_.node_rank =
        joined_->machine_rank;  // GROUP_RANK; differs from the request when ranked by arrival
    plan_.rank_offset = joined_->rank_offset;
    if (master_ && !awaitWatches(*server_, plan_.num_machines, plan_.rdzv_timeout)) {
      say("not every machine's agent is watching the store for failures; it may have died");
    }
    rank_offset_ = joined_->rank_offset;
    say("machine " + std::to_string(joined_->machine_rank) + " of " +
        std::to_string(plan_.num_machines) + ": ranks " + std::to_string(joined_->rank_offset) +
        ".." + std::to_string(joined_->rank_offset + plan_.local_world_size - 1) + " of " +
        std::to_string(joined_->world_size));
    chooseWorkerInterface(toMaster);
    return {};
  }

  // The failure watch is parked before this agent registers: once the rendezvous completes,
  // every machine's watch is parked (or on its way), and the master's exit barrier counts them.
  // The publisher is the job link's own connection (the link's thread uses it alone).
  Expected<void> parkFailureWatch() {
    try {
      watch_store_ = connectToMaster(plan_, store_port_, std::chrono::seconds(30));
      watch_fd_ = watch_store_->startWait({failureKey(rdzv_)});
      publisher_store_ = connectToMaster(plan_, store_port_, std::chrono::seconds(30));
    } catch (const Error& e) {
      return makeError(std::string("cannot watch the master's store for failures: ") + e.what());
    }
    return {};
  }

  void chooseWorkerInterface(const std::optional<Route>& toMaster) {
    if (lookup(parent_env_, "GLOO_SOCKET_IFNAME")) return;
    if (auto iface = workerInterface(*joined_, toMaster)) {
      plan_.common_env["GLOO_SOCKET_IFNAME"] = *iface;
      say("workers use GLOO_SOCKET_IFNAME=" + *iface +
          " (the interface that reaches the other machines)");
    }
  }

  // The run directory, made once the machines have met (an agent stopped while it waits leaves
  // nothing behind), laid out as torchrun's: BASE/<run_id>_<random>/attempt_K/<local rank>/.
  // BASE is --log_dir; without one it is a new directory in $TMPDIR (else /tmp), as torchrun's
  // torchelastic_*, kept when --redirects or --tee put streams in files, else removed at the end
  // (it then holds only the workers' error files). The random part keeps runs that share a run
  // id (--rdzv_id, machines sharing a file system) apart.
  Expected<void> makeRunDir() {
    std::string base;
    if (plan_.log_dir) {
      base = *plan_.log_dir;
    } else {
      auto tmp = lookup(parent_env_, "TMPDIR");
      const std::string parent = tmp && !tmp->empty() ? *tmp : "/tmp";
      std::string tmpl = parent + "/accel-run-XXXXXX";
      if (!::mkdtemp(tmpl.data()))
        return makeError("cannot create a run directory in " + parent + ": " +
                         std::strerror(errno));
      base = tmpl;
      base_to_remove_ = base;
      temp_run_dir_ = true;  // until the run's own directory is made in it
    }
    std::string tmpl = base + "/" + plan_.run_id + "_XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      return makeError((plan_.log_dir ? "--log_dir: " : "") + std::string("cannot create ") + tmpl +
                       ": " + std::strerror(errno));
    }
    run_dir_ = tmpl;
    if (!plan_.log_dir) temp_run_dir_ = !plan_.keepsFiles();
    if (plan_.log_dir) {
      say("logs in " + run_dir_ + "/attempt_K/<local rank>/");
    } else if (plan_.keepsFiles()) {
      say("--redirects/--tee without --log_dir: the workers' log files are kept in " + run_dir_ +
          "/attempt_K/<local rank>/");
    }
    return {};
  }

  // A failure on any machine stops the workers on every machine; each names the job's first.
  Expected<void> startSupervisor() {
    supervisor_ = std::make_unique<Supervisor>(plan_, parent_env_, run_dir_, console_);
    if (temp_run_dir_) supervisor_->removeIfKilled(base_to_remove_);
    if (auto ok = supervisor_->start(); !ok) return ok;
    supervisor_->setMasterPort(store_port_);
    supervisor_->setRankOffset(rank_offset_);
    if (server_) supervisor_->setProgressBoard(&board_);
    supervisor_->setStatusFacts(statusFacts());
    if (watch_store_) {
      link_ =
          std::make_unique<JobLink>(std::move(watch_store_), watch_fd_, std::move(publisher_store_),
                                    rdzv_, joined_->machine_rank, joined_->machines.front().host);
      supervisor_->setJobLink(link_.get(), joined_->machine_rank, rdzv_.host);
    }
    return {};
  }

  // What `accel status` shows of this job besides its ranks.
  nlohmann::json statusFacts() const {
    nlohmann::json argv = plan_.argv;
    return {{"run_id", plan_.run_id},
            {"command", argv},
            {"machine_rank", joined_ ? joined_->machine_rank : plan_.node_rank},
            {"num_machines", plan_.num_machines},
            {"world_size", joined_ ? joined_->world_size : plan_.world_size},
            {"store", plan_.master_addr + ":" + std::to_string(store_port_)},
            {"run_dir", run_dir_},
            {"machine_status_key_prefix", plan_.num_machines > 1 ? statusKeyPrefix(rdzv_) : ""}};
  }

  JobReport superviseAttempts() {
    JobReport report;
    for (int attempt = 0; attempt <= plan_.max_restarts; ++attempt) {
      if (attempt > 0 && server_) clearWorkerKeys(attempt);
      report.attempts.push_back(supervisor_->runAttempt(attempt));
      const AttemptReport& last = report.attempts.back();
      if (last.succeeded() || supervisor_->stopRequested() || attempt == plan_.max_restarts) break;
      const auto& culprit = last.workers[*last.culprit];
      say("attempt " + std::to_string(attempt) + " failed (rank " + std::to_string(culprit.rank) +
          ": " + describeEnd(culprit) + "); restarting (" + std::to_string(attempt + 1) + " of " +
          std::to_string(plan_.max_restarts) + ")");
    }
    supervisor_->finish();
    if (link_)
      link_->stop();  // at once, even if a publication still waits for an unreachable master
    report.exit_code = jobExitCode(report.attempts.back());
    return report;
  }

  // Before attempt K > 0: the workers' keys of the attempts before it are removed from the
  // store, so no worker reads a stale value. torch 1.13 prefixed worker keys per attempt, torch
  // 2.x does not (it expects a new store per attempt); clearing serves both. The agents' own keys
  // ("/accel/...") stay. Every worker of the last attempt has exited by now.
  void clearWorkerKeys(int attempt) {
    try {
      size_t removed = server_->clearKeysExcept({"/" + std::string(kAgentKeyPrefix)});
      say("attempt " + std::to_string(attempt) + " starts with a fresh key space (" +
          std::to_string(removed) + " keys of earlier attempts removed from the store)");
    } catch (const Error& e) {
      say(std::string("could not clear the store between attempts: ") + e.what());
    }
  }

  void reportOutcome(const JobReport& report) {
    console_.write(2, renderFailureSummary(report));
    console_.flush();  // supervision is over: now the summary may wait for the terminal
    if (!plan_.keepsFiles()) return;
    auto ok = config::writeFileAtomically(run_dir_ + "/summary.json",
                                          renderReportJson(report).dump(2) + "\n");
    if (!ok) say("could not write summary.json: " + ok.error());
  }

  // The master keeps the store up until every machine's workers are done with it, or every
  // other agent is gone; after a failure, only as long as the others need to read it. Another
  // machine's agent reports and leaves; an unreachable master does not hold it for long.
  void awaitOtherMachines() {
    const auto afterFailure = plan_.term_timeout + std::chrono::milliseconds(10000);
    if (!master_) agent_store_->setTimeout(afterFailure);
    // 1: the master's own watch.
    auto othersGone = [this] { return server_ && server_->stats().tracked_waiters <= 1; };
    int done = exitBarrier(*agent_store_, rdzv_, master_, afterFailure, othersGone);
    if (master_ && done < plan_.num_machines) {
      say("stopping the store although only " + std::to_string(std::max(done, 0)) + "/" +
          std::to_string(plan_.num_machines) + " machines reported their workers finished");
    }
  }

  LaunchPlan plan_;
  const Environment parent_env_;
  bool master_;  // hosts the job's store (machine 0); decided for good by hostStore
  int store_port_;
  int rank_offset_;
  Console console_;
  std::string run_dir_;         // BASE/<run_id>_<random>
  std::string base_to_remove_;  // the temporary BASE (no --log_dir)
  bool temp_run_dir_ = false;   // remove base_to_remove_ at the end
  ProgressBoard board_;  // before server_: the store's thread writes to it until server_ stops
  std::unique_ptr<store::TcpStoreServer> server_;
  std::unique_ptr<store::TcpStoreClient> agent_store_, watch_store_, publisher_store_;
  int watch_fd_ = -1;
  RendezvousOptions rdzv_;
  std::optional<RendezvousResult> joined_;
  std::unique_ptr<JobLink> link_;
  std::unique_ptr<Supervisor> supervisor_;
};

// The checks and notices before the agent starts; an error here spawns nothing.
Expected<void> preflight(const LaunchPlan& plan) {
  // The other machines connect to it instead. An agent that only guessed it hosts the c10d
  // rendezvous joins whoever listens on the port (hostStore).
  if (plan.master_port && plan.node_rank == 0 && !guessedStoreHost(plan)) {
    if (auto ok = checkPortFree(*plan.master_port); !ok) return ok;
  }
  for (const auto& text : plan.notices) notice(plan, text);
  if (plan.omp_notice) {
    notice(
        plan,
        "OMP_NUM_THREADS was unset; each of the " + std::to_string(plan.local_world_size) +
            " processes gets OMP_NUM_THREADS=1 (set --num_cpu_threads_per_process to change it)");
  }
  return {};
}

}  // namespace

Expected<JobReport> launch(const LaunchOptions& options) {
  const Environment parentEnv = processEnvironment();
  auto planned =
      makeLaunchPlan(options, config::PathEnv::fromProcess(), parentEnv, countUsableGpus);
  if (!planned) return std::move(planned).takeError();
  LaunchPlan plan = std::move(*planned);
  if (auto ok = assignCpuAffinity(plan); !ok) return std::move(ok).takeError();
  resolveSchedulerMaster(plan);
  decideStoreHost(plan);
  if (plan.dry_run) {
    if (plan.dry_run_json) {
      printDryRunJson(dryRunView(plan));
    } else {
      printDryRun(dryRunView(plan));
    }
    return JobReport{};
  }
  if (plan.exec_in_place) {
    for (const auto& text : plan.notices) notice(plan, text);
    return execRank(plan, parentEnv);
  }
  if (auto ok = preflight(plan); !ok) return std::move(ok).takeError();
  return Agent(std::move(plan), parentEnv).run();
}

}  // namespace accel::launcher
