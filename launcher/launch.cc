#include "launcher/launch.h"

#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "accel/error.h"
#include "config/config_file.h"
#include "launcher/base/posix.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/plan/planner.h"
#include "launcher/plan/run_dir.h"
#include "launcher/plan/worker_env.h"
#include "launcher/rendezvous/agent_rendezvous.h"
#include "launcher/rendezvous/job_link.h"
#include "launcher/rendezvous/ports.h"
#include "launcher/report/dry_run.h"
#include "launcher/supervise/console.h"
#include "launcher/supervise/posix_processes.h"
#include "launcher/supervise/subprocess_posix.h"
#include "launcher/supervise/supervisor.h"
#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/tcp_store_server.h"
#include "probes/net_check.h"

namespace accel::launcher {
namespace {

using probes::Environment;
using probes::Route;

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

// TCP keep-alives on the failure watch's connection, the one that waits on the master for the
// whole job: a master whose machine or link vanishes without closing it (no FIN, no RST) is
// noticed after kKeepAliveIdleS + kKeepAliveCount probes kKeepAliveIntervalS apart (~5 s), and the
// watch then fails as for a closed connection — the job ends here, saying the master was lost.
constexpr int kKeepAliveIdleS = 2, kKeepAliveIntervalS = 1, kKeepAliveCount = 3;

void keepAlive(int fd) {
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepAliveIdleS, sizeof kKeepAliveIdleS);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepAliveIntervalS, sizeof kKeepAliveIntervalS);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepAliveCount, sizeof kKeepAliveCount);
  // And data that stays unacknowledged as long (keep-alives only probe an idle connection).
  const unsigned userTimeoutMs = (kKeepAliveIdleS + kKeepAliveIntervalS * kKeepAliveCount) * 1000;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof userTimeoutMs);
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

// An agent of torchrun's elastic command line that hosts the store only because the endpoint is
// this machine (no is_host=): another agent here may already listen on the port.
bool guessedStoreHost(const LaunchPlan& plan) {
  return plan.rank_by_arrival && !plan.store_host_configured.has_value();
}

// The interface the workers' Gloo should use: the one that reaches the other machines. A
// non-master reaches the master; the master reaches machine 1 at the address it came from.
std::string interfaceToOthers(const RendezvousResult& joined,
                              const std::optional<Route>& toMaster) {
  if (joined.machine_rank != 0) return toMaster ? toMaster->interface : "";
  for (const auto& m : joined.machines) {
    if (m.machine_rank == 0 || m.address.empty()) continue;
    if (auto route = probes::routeTo(m.address); route && !route->interface.empty()) {
      return route->interface;
    }
  }
  return "";
}

// A rank per scheduler task: become the worker. Returns only when the command cannot be run.
Expected<JobReport> execRank(const LaunchPlan& plan, const Environment& parentEnv,
                             Console& console) {
  for (const auto& text : plan.notices) console.notice(text);
  Placement placement = staticPlacement(plan, *plan.master_port);
  if (plan.num_machines > 1) {
    auto route = probes::routeTo(plan.master_addr);
    placement.socket_interface = chooseSocketInterface(parentEnv, route ? route->interface : "");
  }
  console.notice(plan.scheduler.value_or("the scheduler") + ": " + std::to_string(plan.world_size) +
                 " ranks, one per task, on " + std::to_string(plan.num_machines) +
                 " node(s); rank 0 hosts the store at " + plan.master_addr + ":" +
                 std::to_string(*plan.master_port));
  console.flush();
  const WorkerSlot slot{plan.exec_local_rank, 0, ""};
  std::string why = execInPlace(plan.argv, workerEnvironment(plan, placement, slot, parentEnv));
  return makeError("rank " + std::to_string(plan.exec_rank) + ": cannot execute '" + plan.argv[0] +
                   "': " + why);
}

// One machine's agent for one job. run() is its lifecycle, phase by phase: host the job's store
// (machine 0), meet the other machines, make the run directory, supervise every attempt,
// report, and the exit barrier. The plan is read, never changed; what the meeting decides is the
// placement, made once. Each phase keeps what it makes in the agent; an error before anything is
// spawned ends the job, and the destructor removes what was made.
class Agent {
 public:
  Agent(const LaunchPlan& plan, Environment parentEnv, Console& console)
      : plan_(plan),
        parent_env_(std::move(parentEnv)),
        console_(console),
        requested_rank_(plan.machine_rank),
        store_port_(plan.master_port.value_or(0)) {}

  ~Agent() {
    supervisor_.reset();
    link_.reset();
    if (server_) server_->stop();
    if (temp_run_dir_) removeTree(base_to_remove_);
  }

  Expected<JobReport> run() {
    if (auto ok = useLogDir(); !ok) return std::move(ok).takeError();
    if (auto ok = hostStore(); !ok) return std::move(ok).takeError();
    if (auto ok = placeThisMachine(); !ok) return std::move(ok).takeError();
    if (auto ok = makeRunDir(); !ok) return std::move(ok).takeError();
    if (auto ok = startSupervisor(); !ok) return std::move(ok).takeError();
    JobReport report = superviseAttempts();
    reportOutcome(report);
    // With the master lost, there is no store to wait in: the job ends here at once.
    if (rendezvous_client_ && !(link_ && link_->masterLost())) awaitOtherMachines();
    return report;
  }

 private:
  bool hostsStore() const { return requested_rank_ == 0; }

  // --log_dir must be usable before anything starts; the run's own directory in it is made later.
  Expected<void> useLogDir() {
    if (!plan_.log_dir) return {};
    if (auto ok = config::makeDirectories(*plan_.log_dir); !ok) {
      return makeError("--log_dir: " + ok.error());
    }
    return {};
  }

  // Machine 0's agent hosts the job's store on the port it keeps for the whole job (port 0: the
  // kernel picks a free one, so nobody else can take it); the others connect to it. Until the
  // supervisor starts, signals keep their default effect: Ctrl-C during the rendezvous simply
  // ends the agent, which has started nothing yet.
  Expected<void> hostStore() {
    if (!hostsStore()) return {};
    const store::TcpStoreServerOptions options = storeOptions();
    auto listen = [&] { server_ = store::TcpStoreServer::start(options); };
    try {
      if (!guessedStoreHost(plan_)) {
        listen();
      } else if (hostOrJoin(
                     listen, [this] { return portHasListener(store_port_); }, jitteredPause(),
                     50) == HostOutcome::Join) {
        joinInsteadOfHosting();
        return {};
      }
    } catch (const Error& e) {
      return makeError(std::string(e.what()) + " (--main_process_ip/--main_process_port)");
    }
    store_port_ = server_->port();
    return {};
  }

  // A short random wait between two agents' tries to host the same port.
  static std::function<void()> jitteredPause() {
    auto jitter = std::make_shared<std::minstd_rand>(static_cast<unsigned>(::getpid()));
    return
        [jitter] { std::this_thread::sleep_for(std::chrono::milliseconds(1 + (*jitter)() % 20)); };
  }

  store::TcpStoreServerOptions storeOptions() {
    // With other machines, listen on every address: --main_process_ip may be a name that
    // resolves to loopback here (Debian's 127.0.1.1) yet to the real address elsewhere.
    store::TcpStoreServerOptions options;
    const bool v6 = plan_.master_addr.find(':') != std::string::npos;
    options.host = plan_.num_machines > 1 ? (v6 ? "::" : "0.0.0.0") : plan_.master_addr;
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
    requested_rank_ = std::nullopt;
    console_.notice("port " + std::to_string(store_port_) +
                    " is taken here: another agent on this machine hosts the rendezvous; joining "
                    "it (this machine's rank comes from the order in which it joins)");
  }

  // This machine's placement: on one machine the plan's; with others, what the rendezvous says.
  Expected<void> placeThisMachine() {
    if (plan_.num_machines == 1) {
      placement_ = staticPlacement(plan_, store_port_);
      return {};
    }
    return meetMachines();
  }

  Expected<void> meetMachines() {
    // Before anything is spawned: the master must be reachable, from an interface we can name.
    std::optional<Route> toMaster;
    if (!hostsStore()) {
      auto reached = probes::waitForListener(
          plan_.master_addr, store_port_, plan_.rdzv_timeout, std::chrono::seconds(10),
          [this](const std::string& status) { console_.notice(status); });
      if (!reached) return makeError(reached.error());
      toMaster = *reached;
    } else if (auto route = probes::routeTo(plan_.master_addr)) {
      toMaster = *route;
    }
    if (auto ok = parkFailureWatch(); !ok) return ok;
    auto joined = joinMachines(toMaster);
    if (!joined) return makeError(joined.error());
    joined_ = *joined;
    if (hostsStore() && !awaitWatches(*server_, plan_.num_machines, plan_.rdzv_timeout)) {
      console_.notice(
          "not every machine's agent is watching the store for failures; it may have died");
    }
    placement_ = placementOf(*joined, toMaster);
    console_.notice("machine " + std::to_string(joined->machine_rank) + " of " +
                    std::to_string(plan_.num_machines) + ": ranks " +
                    std::to_string(joined->rank_offset) + ".." +
                    std::to_string(joined->rank_offset + plan_.local_world_size - 1) + " of " +
                    std::to_string(joined->world_size));
    if (placement_.socket_interface) {
      console_.notice("workers use GLOO_SOCKET_IFNAME=" + *placement_.socket_interface +
                      " (the interface that reaches the other machines)");
    }
    return {};
  }

  // What the rendezvous decided, as the workers will see it.
  Placement placementOf(const RendezvousResult& joined, const std::optional<Route>& toMaster) {
    Placement p = staticPlacement(plan_, store_port_);
    p.machine_rank = joined.machine_rank;  // differs from the request when ranked by arrival
    p.rank_offset = joined.rank_offset;
    p.world_size = joined.world_size;
    p.socket_interface = chooseSocketInterface(parent_env_, interfaceToOthers(joined, toMaster));
    return p;
  }

  // The failure watch is parked before this agent registers: once the rendezvous completes,
  // every machine's watch is parked (or on its way), and the master's exit barrier counts them.
  // The publisher is the job link's own connection (the link's thread uses it alone).
  Expected<void> parkFailureWatch() {
    try {
      watch_store_ = connectToMaster(plan_, store_port_, std::chrono::seconds(30));
      watch_fd_ = watch_store_->startWait({failureKey(rdzv_)});
      keepAlive(watch_fd_);
      publisher_store_ = connectToMaster(plan_, store_port_, std::chrono::seconds(30));
      // Its requests are small and the store answers at once: a reply that takes longer than
      // this is a master gone quiet, and the link's thread must get back to the watch.
      publisher_store_->setTimeout(std::chrono::seconds(5));
    } catch (const Error& e) {
      return makeError(std::string("cannot watch the master's store for failures: ") + e.what());
    }
    return {};
  }

  // Connects this agent to the master's store and joins the rendezvous of the machines.
  // rdzv_.run_id keeps its default: the store belongs to this job alone, and the server's tracked
  // failure key (storeOptions) is computed from the same default.
  Expected<RendezvousResult> joinMachines(const std::optional<Route>& toMaster) {
    const std::string address = plan_.master_addr + ":" + std::to_string(store_port_);
    try {
      rendezvous_client_ = connectToMaster(plan_, store_port_, plan_.rdzv_timeout);
    } catch (const Error& e) {
      return makeError(std::string("cannot reach the master agent (machine_rank 0): ") + e.what());
    }
    rdzv_.num_machines = plan_.num_machines;
    rdzv_.requested_machine_rank = requested_rank_;
    rdzv_.local_world_size = plan_.local_world_size;
    rdzv_.host = hostName();
    // --local_addr (torchrun's) names this machine's address for the others; else the route's.
    rdzv_.address = plan_.local_addr.value_or(toMaster ? toMaster->local_ip : "");
    rdzv_.store_address = address;
    rdzv_.timeout = plan_.rdzv_timeout;
    rdzv_.progress = [this](const std::string& status) {
      console_.notice("rendezvous: " + status);
    };
    auto result = rendezvous(*rendezvous_client_, rdzv_);
    if (!result) return result;
    if (result->world_size != plan_.world_size) {
      return makeError(
          "the machines disagree on the job's size: this machine expects "
          "num_processes " +
          std::to_string(plan_.world_size) + " but the machines that joined run " +
          std::to_string(result->world_size) + " processes in total");
    }
    return result;
  }

  // The run directory, made once the machines have met (an agent stopped while it waits leaves
  // nothing behind), laid out as torchrun's (plan/run_dir.h): BASE/<run_id>_<random>/. BASE is
  // --log_dir; without one it is a new directory in $TMPDIR (else /tmp), as torchrun's
  // torchelastic_*, kept when --redirects or --tee put streams in files, else removed at the end
  // (it then holds only the workers' error files). The random part keeps runs that share a run
  // id (--rdzv_id, machines sharing a file system) apart.
  Expected<void> makeRunDir() {
    std::string base;
    if (plan_.log_dir) {
      base = *plan_.log_dir;
    } else {
      const std::string parent = temporaryParent();
      std::string tmpl = parent + "/accel-run-XXXXXX";
      if (!::mkdtemp(tmpl.data())) {
        return makeError("cannot create a run directory in " + parent + ": " +
                         std::strerror(errno));
      }
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
      console_.notice("logs in " + logsPattern(run_dir_));
    } else if (plan_.keepsFiles()) {
      console_.notice("--redirects/--tee without --log_dir: the workers' log files are kept in " +
                      logsPattern(run_dir_));
    }
    return {};
  }

  // Where a temporary BASE goes: $TMPDIR; else, when nothing in it is kept, a tmpfs (/dev/shm:
  // making and removing its directories costs a fraction of a disk file system's, which is most
  // of a short job's start-up); else /tmp.
  std::string temporaryParent() const {
    auto tmp = probes::lookup(parent_env_, "TMPDIR");
    if (tmp && !tmp->empty()) return *tmp;
    if (!plan_.keepsFiles() && ::access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
    return "/tmp";
  }

  // The real processes (guard, subreaper), `accel status`, the job link, then the supervisor,
  // which takes them all. A failure on any machine stops the workers on every machine.
  Expected<void> startSupervisor() {
    SupervisorParts parts(console_, processes_, clock_);
    parts.run_dir = run_dir_;
    parts.parent_env = parent_env_;
    if (server_) parts.board = &board_;
    if (watch_store_) {
      link_ =
          std::make_unique<JobLink>(std::move(watch_store_), watch_fd_, std::move(publisher_store_),
                                    rdzv_, joined_->machine_rank, joined_->machines.front().host);
      parts.link = link_.get();
      parts.machine_rank = joined_->machine_rank;
      parts.host = rdzv_.host;
    }
    if (auto listening = status_.open(); listening) {
      parts.status = &status_;
      parts.status_facts = statusFacts();
    } else {
      console_.notice("`accel status` will not see this job: " + listening.error());
    }
    auto created = Supervisor::create(plan_, std::move(parts));
    if (!created) return std::move(created).takeError();
    supervisor_ = std::move(*created);
    // After the supervisor blocked the signals: the guard's fork must not take them.
    return processes_.start(temp_run_dir_ ? base_to_remove_ : "");
  }

  // What `accel status` shows of this job besides its ranks.
  nlohmann::json statusFacts() const {
    nlohmann::json argv = plan_.argv;
    return {{"run_id", plan_.run_id},
            {"command", argv},
            {"machine_rank", placement_.machine_rank},
            {"num_machines", plan_.num_machines},
            {"world_size", placement_.world_size},
            {"store", plan_.master_addr + ":" + std::to_string(store_port_)},
            {"run_dir", run_dir_},
            {"machine_status_key_prefix", plan_.num_machines > 1 ? statusKeyPrefix(rdzv_) : ""}};
  }

  JobReport superviseAttempts() {
    JobReport report = supervisor_->runAttempts(placement_, [this](int attempt) {
      if (server_) clearWorkerKeys(attempt);
    });
    status_.close();  // no attempt to show any more (the exit barrier may still take a while)
    processes_.finish();
    supervisor_.reset();       // the signals are the default ones again
    if (link_) link_->stop();  // at once, even if a publication still waits for the master
    return report;
  }

  // Before attempt K > 0: the workers' keys of the attempts before it are removed from the
  // store, so no worker reads a stale value. torch 1.13 prefixed worker keys per attempt, torch
  // 2.x does not (it expects a new store per attempt); clearing serves both. The agents' own keys
  // ("/accel/...") stay. Every worker of the last attempt has exited by now.
  void clearWorkerKeys(int attempt) {
    try {
      size_t removed = server_->clearKeysExcept({"/" + std::string(kAgentKeyPrefix)});
      console_.notice("attempt " + std::to_string(attempt) + " starts with a fresh key space (" +
                      std::to_string(removed) +
                      " keys of earlier attempts removed from the store)");
    } catch (const Error& e) {
      console_.notice(std::string("could not clear the store between attempts: ") + e.what());
    }
  }

  void reportOutcome(const JobReport& report) {
    console_.write(2, renderFailureSummary(report));
    console_.flush();  // supervision is over: now the summary may wait for the terminal
    if (!plan_.keepsFiles()) return;
    auto ok = config::writeFileAtomically(run_dir_ + "/summary.json",
                                          renderReportJson(report).dump(2) + "\n");
    if (!ok) console_.notice("could not write summary.json: " + ok.error());
  }

  // The master keeps the store up until every machine's workers are done with it, or every
  // other agent is gone; after a failure, only as long as the others need to read it. Another
  // machine's agent reports and leaves; an unreachable master does not hold it for long.
  void awaitOtherMachines() {
    const auto afterFailure = plan_.term_timeout + std::chrono::milliseconds(10000);
    if (!hostsStore()) rendezvous_client_->setTimeout(afterFailure);
    // 1: the master's own watch.
    auto othersGone = [this] { return server_ && server_->stats().tracked_waiters <= 1; };
    int done = exitBarrier(*rendezvous_client_, rdzv_, hostsStore(), afterFailure, othersGone);
    if (hostsStore() && done < plan_.num_machines) {
      console_.notice("stopping the store although only " + std::to_string(std::max(done, 0)) +
                      "/" + std::to_string(plan_.num_machines) +
                      " machines reported their workers finished");
    }
  }

  const LaunchPlan& plan_;
  const Environment parent_env_;
  Console& console_;
  // The machine rank this agent asks the rendezvous for (0: it hosts the store); the plan's,
  // unless hostStore found another agent here hosting a guessed c10d endpoint.
  std::optional<int> requested_rank_;
  int store_port_;
  Placement placement_;         // this machine's, once placeThisMachine decided it
  std::string run_dir_;         // BASE/<run_id>_<random>
  std::string base_to_remove_;  // the temporary BASE (no --log_dir)
  bool temp_run_dir_ = false;   // remove base_to_remove_ at the end
  ProgressBoard board_;  // before server_: the store's thread writes to it until server_ stops
  std::unique_ptr<store::TcpStoreServer> server_;
  std::unique_ptr<store::TcpStoreClient> rendezvous_client_, watch_store_, publisher_store_;
  int watch_fd_ = -1;
  RendezvousOptions rdzv_;
  std::optional<RendezvousResult> joined_;
  std::unique_ptr<JobLink> link_;
  PosixProcesses processes_;
  MonotonicClock clock_;
  StatusListener status_;
  std::unique_ptr<Supervisor> supervisor_;
};

// The checks and notices before the agent starts; an error here spawns nothing.
Expected<void> preflight(const LaunchPlan& plan, Console& console) {
  // The other machines connect to it instead. An agent that only guessed it hosts the c10d
  // rendezvous joins whoever listens on the port (hostStore).
  if (plan.master_port && plan.machine_rank == 0 && !guessedStoreHost(plan)) {
    if (auto ok = checkPortFree(*plan.master_port); !ok) return ok;
  }
  for (const auto& text : plan.notices) console.notice(text);
  if (plan.omp_notice) {
    console.notice("OMP_NUM_THREADS was unset; each of the " +
                   std::to_string(plan.local_world_size) +
                   " processes gets OMP_NUM_THREADS=1 (set --num_cpu_threads_per_process to "
                   "change it)");
  }
  return {};
}

}  // namespace

Expected<JobReport> launch(const LaunchOptions& options) {
  const Environment parentEnv = probes::processEnvironment();
  auto planned = planLaunch(options, parentEnv);
  if (!planned) return std::move(planned).takeError();
  const LaunchPlan plan = std::move(*planned);
  if (plan.dry_run) {
    const std::string out = plan.dry_run_json ? renderDryRunJson(plan) : renderDryRun(plan);
    writeAll(1, out.data(), out.size());
    return JobReport{};
  }
  Console console(plan.quiet);
  if (plan.exec_in_place) return execRank(plan, parentEnv, console);
  if (auto ok = preflight(plan, console); !ok) return std::move(ok).takeError();
  return Agent(plan, parentEnv, console).run();
}

}  // namespace accel::launcher
