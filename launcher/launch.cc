#include "launcher/launch.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "accel/error.h"
#include "config/config_file.h"
#include "launcher/base/posix.h"
#include "launcher/base/stop_signals.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/plan/planner.h"
#include "launcher/plan/run_dir.h"
#include "launcher/plan/worker_env.h"
#include "launcher/rendezvous/c10d/group_store.h"
#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/c10d/store_rounds.h"
#include "launcher/rendezvous/etcd/rounds.h"
#include "launcher/rendezvous/solo_group.h"
#include "launcher/rendezvous/store_host.h"
#include "launcher/report/dry_run.h"
#include "launcher/store/tcp_store_server.h"
#include "launcher/supervise/console.h"
#include "launcher/supervise/posix_processes.h"
#include "launcher/supervise/subprocess_posix.h"
#include "launcher/supervise/supervisor.h"
#include "libaccel/common/remove_tree.h"
#include "probes/gpu_health.h"
#include "probes/health.h"
#include "probes/net_check.h"
#include "probes/ports.h"
#include "probes/python_probe.h"

namespace accel::launcher {
namespace {

using probes::Environment;

// An agent of torchrun's elastic command line that hosts the store only because the endpoint is
// this machine (no is_host=): another agent here may already listen on the port.
bool guessedStoreHost(const LaunchPlan& plan) {
  return plan.rank_by_arrival && !plan.store_host_configured.has_value();
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

// Where a temporary run directory's BASE goes: $TMPDIR; else, when nothing in it is kept, a
// tmpfs (/dev/shm: making and removing its directories costs a fraction of a disk file system's,
// which is most of a short job's start-up); else /tmp.
std::string temporaryParent(const LaunchPlan& plan, const Environment& env) {
  auto tmp = probes::lookup(env, "TMPDIR");
  if (tmp && !tmp->empty()) return *tmp;
  if (!plan.keepsFiles() && ::access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  return "/tmp";
}

// One machine's agent for one job. run() is its lifecycle, phase by phase: host the job's store
// (machine 0), meet the other machines, make the run directory, supervise every attempt,
// report, and the exit barrier. The plan is read, never changed; what each meeting of the
// machines decides is the placement (a new one per round: each restart or change of the group,
// MachineGroup). Each phase keeps what it makes in the agent; an error before anything is
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
    group_.reset();
    if (server_) server_->stop();
    if (temp_run_dir_) removeTree(base_to_remove_);
  }

  Expected<JobReport> run() {
    if (auto ok = hostStore(); !ok) return std::move(ok).takeError();
    if (auto ok = placeThisMachine(); !ok) {
      if (stopped_by_) {  // Ctrl-C or SIGTERM while round 0 formed
        console_.notice("stopped by " + signalName(stopped_by_) + " while the machines met");
        JobReport stopped;
        stopped.exit_code = 128 + stopped_by_;
        return stopped;
      }
      if (!group_ || !group_->jobClosed()) return std::move(ok).takeError();
      console_.notice(ok.error());  // a spare: the job did not need this machine
      return JobReport{};
    }
    if (auto ok = makeRunDir(); !ok) return std::move(ok).takeError();
    if (auto ok = startSupervisor(); !ok) return std::move(ok).takeError();
    JobReport report = superviseAttempts();
    report.health_checks = healthRecords();
    addHints(report);
    reportOutcome(report);
    group_->awaitOtherMachines();  // machine 0 may wait for the others here, and says why
    // "accel launch exits with N": it does, now.
    writeSummary(renderSummaryEnd(
        report, plan_.mode == LaunchMode::Torchrun ? "accel run" : "accel launch"));
    return report;
  }

 private:
  // Machine 0's agent hosts the job's store on the port it keeps for the whole job (port 0: the
  // kernel picks a free one, so nobody else can take it); the others connect to it. Until round
  // 0's meeting (meetFirstRound), signals keep their default effect: Ctrl-C while the agent
  // hosts or connects simply ends it, which has started nothing yet.
  Expected<void> hostStore() {
    if (plan_.etcd_endpoints) return hostOwnStore();
    if (requested_rank_ != 0) return sayRendezvousRole();
    const store::TcpStoreServerOptions options = storeOptions();
    auto listen = [&] { server_ = store::TcpStoreServer::start(options); };
    try {
      if (!guessedStoreHost(plan_)) {
        listen();
      } else if (probes::hostOrJoin(
                     listen, [this] { return probes::portHasListener(store_port_); },
                     jitteredPause(), 50) == probes::HostOutcome::Join) {
        joinInsteadOfHosting();
        return {};
      }
    } catch (const Error& e) {
      const std::string& flag = plan_.address_flag;
      return makeError(std::string(e.what()) + " (" +
                       (flag == "--rdzv_endpoint" ? flag
                        : flag == "--master_addr" ? "--master_addr/--master_port"
                                                  : "--main_process_ip/--main_process_port") +
                       ")");
    }
    store_port_ = server_->port();
    store_host_ = std::make_unique<TcpStoreHost>(*server_, keep_alives_);
    return sayRendezvousRole();
  }

  // On etcd every agent hosts a store of its own on a port the kernel picks: the workers' when
  // its machine is a round's machine 0 (etcd/rounds.h).
  Expected<void> hostOwnStore() {
    store_port_ = 0;  // --master_port names no port here: each agent's is its own
    try {
      server_ = store::TcpStoreServer::start(storeOptions());
    } catch (const Error& e) {
      return makeError(std::string("cannot host this machine's store: ") + e.what());
    }
    store_port_ = server_->port();
    store_host_ = std::make_unique<TcpStoreHost>(*server_, keep_alives_);
    return sayRendezvousRole();
  }

  // torchrun's elastic command line: whether this machine hosts the rendezvous or joins it,
  // said once, when it is decided.
  Expected<void> sayRendezvousRole() {
    if (!plan_.rendezvous_notice.empty()) console_.notice(plan_.rendezvous_notice);
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
    // Every agent parks a WAIT on its round's stop key: the master counts them (awaitWatches).
    options.tracked_wait_prefix = StoreRounds::trackedWaitPrefix(plan_.rendezvous_id);
    // Every agent parks a WAIT on its own presence key for the whole job: the agents alive.
    options.presence_key_prefix = StoreRounds::presenceWaitPrefix(plan_.rendezvous_id);
    // The ranks' heartbeats and their work per step (rank_watch.h) reach the supervisor without
    // a client.
    for (const auto& prefix : {storedHeartbeatPrefix(), storedWorkPrefix()}) {
      options.observed.push_back(
          {prefix, [board = &board_](const std::string& key, const std::string& value) {
             board->onWrite(key, value);
           }});
    }
    // The agents' keep-alives reach the master's link without a request (KeepAliveBoard).
    options.observed.push_back(keep_alives_->observer(plan_.rendezvous_id));
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

  Expected<std::unique_ptr<RoundGroup>> etcdGroup(const Notify& notify) {
    auto endpoints = parseEtcdEndpoints(*plan_.etcd_endpoints);
    if (!endpoints) return makeError("--rdzv_endpoint: " + endpoints.error());
    const TlsFiles files{plan_.etcd_cacert, plan_.etcd_cert, plan_.etcd_key};
    if (auto tls = useTls(*endpoints, plan_.etcd_https, files); !tls)
      return makeError("--rdzv_conf: etcd over TLS: " + tls.error());
    EtcdOptions etcd;
    etcd.endpoints = *endpoints;
    return makeEtcdGroup(plan_, parent_env_, notify, etcd, "", store_port_, store_host_.get());
  }

  Expected<std::unique_ptr<RoundGroup>> storeGroup(const Notify& notify) {
    auto store = std::make_unique<TcpGroupStore>(plan_.master_addr, store_port_, plan_.address_flag,
                                                 store_host_.get());
    return makeStoreGroup(plan_, parent_env_, notify, requested_rank_, store_port_,
                          std::move(store));
  }

  // What this machine checks before it joins each round (probes/health.h): free space where the
  // run's files go and in /dev/shm, and --health_check's command; the last results are kept for
  // summary.json.
  RoundGroup::HealthGate healthGate() const {
    probes::HealthSettings s;
    s.directories = {plan_.log_dir ? *plan_.log_dir : temporaryParent(plan_, parent_env_)};
    s.directories.insert(s.directories.end(), plan_.health_check_dirs.begin(),
                         plan_.health_check_dirs.end());
    s.command = plan_.health_check;
    const std::string program = std::filesystem::path(plan_.argv.at(0)).filename().string();
    if (program.rfind("python", 0) == 0) s.python = plan_.argv[0];
    s.endpoints = rendezvousEndpoints();
    // The GPUs NVML sees (none without it), unless the job runs on the CPU: as many as this
    // machine's ranks are expected for a multi-GPU job.
    const auto& c = plan_.config.config;
    const bool multiGpu = c.distributed_type == config::kDistributedMultiGpu;
    if (!c.use_cpu) {
      s.gpus = std::make_shared<probes::GpuHealth>(multiGpu ? plan_.local_world_size : 0);
    }
    s.command_timeout = plan_.health_check_timeout;
    if (auto route = probes::routeTo(rendezvousHost())) s.interface = route->interface;
    return [s, last = last_health_] {
      *last = probes::runHealthChecks(s);  // the main thread's, as meet() is
      return probes::firstFailure(*last);
    };
  }

  // The endpoints this machine meets the others through, for the health checks: etcd's, or the
  // c10d endpoint unless this machine hosts it.
  std::vector<std::pair<std::string, int>> rendezvousEndpoints() const {
    std::vector<std::pair<std::string, int>> out;
    if (!plan_.etcd_endpoints) {
      if (requested_rank_ != 0) out.emplace_back(plan_.master_addr, store_port_);
      return out;
    }
    if (auto endpoints = parseEtcdEndpoints(*plan_.etcd_endpoints)) {
      for (const auto& e : *endpoints) out.emplace_back(e.host, e.port);
    }
    return out;
  }

  // The host this machine reaches to meet the others: the c10d endpoint's, or etcd's first.
  std::string rendezvousHost() const {
    if (!plan_.etcd_endpoints) return plan_.master_addr;
    auto endpoints = parseEtcdEndpoints(*plan_.etcd_endpoints);
    return endpoints && !endpoints->empty() ? endpoints->front().host : "";
  }

  // The health checks before this machine's current round, for summary.json and `accel status`.
  std::vector<HealthRecord> healthRecords() const {
    std::vector<HealthRecord> records;
    for (const auto& c : *last_health_) {
      records.push_back({c.name, c.passed, c.detail, c.took.count()});
    }
    return records;
  }

  // The machines of the job (one: a SoloGroup; several: a RoundGroup through machine 0's store,
  // or through etcd), and this machine's placement in round 0.
  Expected<void> placeThisMachine() {
    Notify notify = [this](const std::string& text) { console_.notice(text); };
    if (plan_.num_machines == 1) {
      SoloSettings solo{plan_.max_restarts, plan_.retry_identical_failures, thisHostName()};
      group_ = std::make_unique<SoloGroup>(solo, staticPlacement(plan_, store_port_),
                                           store_host_.get(), notify);
    } else {
      auto group = plan_.etcd_endpoints ? etcdGroup(notify) : storeGroup(notify);
      if (!group) return std::move(group).takeError();
      (*group)->setHealthGate(healthGate(), plan_.health_check_interval);
      auto connected = (*group)->connect();
      group_ = std::move(*group);
      if (!connected) return connected;
    }
    auto placed = meetFirstRound();
    if (!placed) return std::move(placed).takeError();
    placement_ = *placed;
    return {};
  }

  // Round 0's meeting, with Ctrl-C, SIGTERM, SIGHUP and SIGQUIT turned into the group's interrupt
  // (no worker runs yet to forward them to): the meeting ends at once, and the group, destroyed
  // with the agent, takes this machine out as it goes (on etcd: its lease revoked, so that no
  // round closes with a machine that left). Later rounds are the supervisor's
  // (meetWatchingSignals).
  Expected<Placement> meetFirstRound() {
    MachineGroup& group = *group_;
    StopSignalWatch watch([&group] { group.interrupt(); });
    auto placed = group.meet();
    stopped_by_ = watch.finish();
    return placed;
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
      const std::string parent = temporaryParent(plan_, parent_env_);
      std::string tmpl = parent + "/accel-run-XXXXXX";
      if (!::mkdtemp(tmpl.data())) {
        return makeError("cannot create a run directory in " + parent + ": " +
                         std::strerror(errno) +
                         " (set TMPDIR to a writable directory, or pass --log_dir)");
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

  // The real processes (guard, subreaper), `accel status`, the job link, then the supervisor,
  // which takes them all. A failure on any machine stops the workers on every machine.
  Expected<void> startSupervisor() {
    SupervisorParts parts(console_, processes_, clock_);
    parts.run_dir = run_dir_;
    parts.parent_env = parent_env_;
    if (server_) {
      board_.keepWorkFor(plan_.straggler_window);
      parts.board = &board_;
    }
    parts.host = group_->host();
    if (auto listening = status_.open(); listening) {
      parts.status = &status_;
      parts.status_facts = statusFacts();
      if (plan_.num_machines > 1) parts.health = [this] { return healthJson(healthRecords()); };
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
  // On etcd, the other machines' answers are read there (with the job's TLS files, if any).
  nlohmann::json statusFacts() const {
    nlohmann::json argv = plan_.argv;
    nlohmann::json facts = {{"run_id", plan_.run_id},
                            {"command", argv},
                            {"machine_rank", placement_.machine_rank},
                            {"num_machines", plan_.num_machines},
                            {"world_size", placement_.world_size},
                            {"store", plan_.master_addr + ":" + std::to_string(store_port_)},
                            {"run_dir", run_dir_},
                            {"machine_status_key_prefix", group_->statusKeyPrefix()}};
    if (plan_.etcd_endpoints) {
      facts["store"] = placement_.master_addr + ":" + std::to_string(placement_.master_port);
      facts["etcd"] = {{"endpoints", *plan_.etcd_endpoints},
                       {"https", plan_.etcd_https},
                       {"cacert", plan_.etcd_cacert},
                       {"cert", plan_.etcd_cert},
                       {"key", plan_.etcd_key}};
    }
    return facts;
  }

  JobReport superviseAttempts() {
    JobReport report = supervisor_->runRounds(*group_, placement_);
    status_.close();  // no attempt to show any more (the exit barrier may still take a while)
    processes_.finish();
    supervisor_.reset();  // the signals are the default ones again
    group_->stopLink();   // at once, even if a publication still waits for the master
    return report;
  }

  // What the summary can add from this machine: a python that has torch, for a rank that died
  // importing it (env --check's knowledge, at the moment it is needed).
  // And for a single process that found no RANK, or a torch without libuv: what to do.
  void addHints(JobReport& report) const {
    const bool noTorch = culpritSaid(report, "No module named 'torch'");
    // Only when accel chose the interpreter (its .py and -m command lines: PYTHON -u ...).
    if (noTorch && plan_.argv.size() > 1 && plan_.argv[1] == "-u") {
      if (auto hint = probes::pythonWithTorchHint(plan_.argv[0])) report.hints.push_back(*hint);
    }
    if (auto hint = missingRankHint(report, !plan_.torchrun_env && plan_.world_size == 1))
      report.hints.push_back(*hint);
    if (auto hint = noLibuvHint(report)) report.hints.push_back(*hint);
  }

  // The summary (but its last lines, written once this agent is about to exit) and summary.json.
  void reportOutcome(const JobReport& report) {
    writeSummary(renderSummaryBody(report, plan_.keepsFiles() ? run_dir_ : ""));
    if (!plan_.keepsFiles()) return;
    auto ok = config::writeFileAtomically(run_dir_ + "/summary.json",
                                          renderReportJson(report).dump(2) + "\n");
    if (!ok) console_.notice("could not write summary.json: " + ok.error());
  }

  void writeSummary(const std::string& text) {
    if (text.empty()) return;
    console_.write(2, console_.colour() ? colourSummary(text) : text);
    console_.flush();  // supervision is over: now the summary may wait for the terminal
  }

  const LaunchPlan& plan_;
  const Environment parent_env_;
  Console& console_;
  // The machine rank this agent asks the rendezvous for (0: it hosts the store); the plan's,
  // unless hostStore found another agent here hosting a guessed c10d endpoint.
  std::optional<int> requested_rank_;
  int store_port_;
  Placement placement_;         // this machine's in the current round
  int stopped_by_ = 0;          // the signal that stopped round 0's meeting (0: none)
  std::string run_dir_;         // BASE/<run_id>_<random>
  std::string base_to_remove_;  // the temporary BASE (no --log_dir)
  bool temp_run_dir_ = false;   // remove base_to_remove_ at the end
  ProgressBoard board_;  // before server_: the store's thread writes to it until server_ stops
  // The agents' keep-alives as server_ sees them (before server_, for the same reason).
  std::shared_ptr<KeepAliveBoard> keep_alives_ = std::make_shared<KeepAliveBoard>();
  std::unique_ptr<store::TcpStoreServer> server_;
  std::unique_ptr<TcpStoreHost> store_host_;  // server_'s, for the machine group
  std::unique_ptr<MachineGroup> group_;       // this job's machines (this one alone, or several)
  // The health checks before this machine's last round (healthGate's; the main thread's).
  std::shared_ptr<std::vector<probes::HealthCheck>> last_health_ =
      std::make_shared<std::vector<probes::HealthCheck>>();
  PosixProcesses processes_;
  MonotonicClock clock_;
  StatusListener status_;
  std::unique_ptr<Supervisor> supervisor_;
};

// Where the job's port came from, as the user wrote it: torchrun's flag under `accel run`,
// accelerate's under `accel launch`, the config file's key, or the default.
std::string portOrigin(const LaunchPlan& plan) {
  return config::origin(
      plan.config, "main_process_port",
      plan.mode == LaunchMode::Torchrun ? "--master_port" : "--main_process_port");
}

// Why no directory can be made in `dir` (an errno value), or 0.
int unusableDir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  return ::access(dir.c_str(), W_OK | X_OK) == 0 ? 0 : errno;
}

// The checks and notices before the agent starts; an error here spawns nothing. The checks come
// first: an error that ends the run is never preceded by notices about that run.
Expected<void> preflight(const LaunchPlan& plan, const Environment& env, Console& console) {
  // The other machines connect to it instead. An agent that only guessed it hosts the c10d
  // rendezvous joins whoever listens on the port (hostStore).
  if (plan.master_port && plan.machine_rank == 0 && !guessedStoreHost(plan)) {
    if (auto ok = probes::checkPortFree(*plan.master_port, portOrigin(plan)); !ok) return ok;
  }
  // --log_dir (else the temporary directory) must be usable before anything starts; the run's
  // own directory in it is made later, once the machines have met.
  if (plan.log_dir) {
    if (auto ok = config::makeDirectories(*plan.log_dir); !ok)
      return makeError("--log_dir: " + ok.error());
  } else if (const std::string parent = temporaryParent(plan, env); int err = unusableDir(parent)) {
    return makeError("cannot create a run directory in " + parent + ": " + std::strerror(err) +
                     " (set TMPDIR to a writable directory, or pass --log_dir)");
  }
  if (!plan.defaults_notice.empty()) console.notice(plan.defaults_notice);
  for (const auto& text : plan.notices) console.notice(text);
  if (plan.omp_notice) {
    // The flag that changes it, on the command line the user writes (torchrun has none).
    const std::string how = plan.mode == LaunchMode::Torchrun
                                ? "set OMP_NUM_THREADS to change it"
                                : "set --num_cpu_threads_per_process to change it";
    console.notice("OMP_NUM_THREADS was unset; each of the " +
                   std::to_string(plan.local_world_size) + " processes gets OMP_NUM_THREADS=1 (" +
                   how + ")");
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
  if (auto ok = preflight(plan, parentEnv, console); !ok) return std::move(ok).takeError();
  return Agent(plan, parentEnv, console).run();
}

}  // namespace accel::launcher
