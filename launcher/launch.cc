#include "launcher/launch.h"

#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include "config/config_file.h"
#include "launcher/gpu_probe.h"
#include "launcher/launch_plan.h"
#include "launcher/ports.h"
#include "launcher/subprocess_posix.h"
#include "launcher/supervisor.h"
#include "launcher/worker_env.h"
#include "libaccel/common/env_names.h"
#include "libaccel/common/error.h"
#include "libaccel/store/tcp_store_server.h"

extern char** environ;

namespace accel::launcher {
namespace {

void notice(const LaunchPlan& plan, const std::string& text) {
  if (plan.quiet) return;
  std::string line = "accel: " + text + "\n";
  writeAll(2, line.data(), line.size());
}

std::string shellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void printDryRun(const LaunchPlan& plan, int port) {
  // Port 0: the agent binds a free port when it starts; the dry run cannot know which.
  std::string out;
  for (int lr = 0; lr < plan.local_world_size; ++lr) {
    WorkerSlot slot{lr, 0, port, "<run dir>/attempt_0/rank_" + std::to_string(globalRank(plan, lr)) + "/error.json"};
    out += "rank " + std::to_string(globalRank(plan, lr)) + " (local rank " + std::to_string(lr) + "):\n  command:";
    for (const auto& a : plan.argv) out += " " + shellQuote(a);
    out += "\n  environment (on top of the inherited one):\n";
    for (const auto& kv : launcherVariables(plan, slot)) out += "    " + kv + "\n";
  }
  writeAll(1, out.data(), out.size());
}

// Deletes a directory tree the agent created (depth first, without following links).
void removeTree(const std::string& dir) {
  ::nftw(dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 16,
         FTW_DEPTH | FTW_PHYS);
}

int jobExitCode(const AttemptReport& last) {
  if (last.culprit) return last.workers[*last.culprit].exit_code;
  if (last.agent_signal) return 128 + last.agent_signal;
  return 0;
}

}  // namespace

Expected<JobReport> launch(const LaunchOptions& options) {
  Environment parentEnv;
  for (char** e = environ; *e; ++e) parentEnv.emplace_back(*e);

  auto planned = makeLaunchPlan(options, config::PathEnv::fromProcess(), parentEnv, countUsableGpus);
  if (!planned) return std::move(planned).takeError();
  const LaunchPlan& plan = *planned;

  if (plan.dry_run) {
    printDryRun(plan, plan.master_port.value_or(0));
    return JobReport{};
  }
  if (plan.master_port) {
    if (auto ok = checkPortFree(*plan.master_port); !ok) return std::move(ok).takeError();
  }
  for (const auto& text : plan.notices) notice(plan, text);
  if (plan.omp_notice) {
    notice(plan, "OMP_NUM_THREADS was unset; each of the " + std::to_string(plan.local_world_size) +
                     " processes gets OMP_NUM_THREADS=1 (set --num_cpu_threads_per_process to change it)");
  }

  // Per-attempt files (error.json, and logs with --log_dir) live in the log dir or a temp dir.
  std::string runDir;
  bool tempRunDir = false;
  if (plan.log_dir) {
    if (auto ok = config::makeDirectories(*plan.log_dir); !ok) return makeError("--log_dir: " + ok.error());
    runDir = *plan.log_dir;
  } else {
    char tmpl[] = "/tmp/accel-run-XXXXXX";
    if (!::mkdtemp(tmpl)) return makeError("cannot create a run directory in /tmp");
    runDir = tmpl;
    tempRunDir = true;
  }

  // The guard is forked before the store's thread exists; workers are forked after, and their
  // children only call async-signal-safe functions before exec.
  Supervisor supervisor(plan, parentEnv, runDir);
  if (auto ok = supervisor.start(); !ok) return std::move(ok).takeError();
  // The agent hosts the job's store on the port it keeps for the whole job: port 0 means the
  // kernel picks a free one and nobody else can take it.
  std::unique_ptr<store::TcpStoreServer> server;
  try {
    server = store::TcpStoreServer::start({plan.master_addr, plan.master_port.value_or(0)});
  } catch (const Error& e) {
    supervisor.finish();
    if (tempRunDir) removeTree(runDir);
    return makeError(std::string(e.what()) + " (--main_process_ip/--main_process_port)");
  }
  supervisor.setMasterPort(server->port());
  JobReport report;
  for (int attempt = 0; attempt <= plan.max_restarts; ++attempt) {
    report.attempts.push_back(supervisor.runAttempt(attempt));
    const AttemptReport& last = report.attempts.back();
    if (last.succeeded() || supervisor.stopRequested() || attempt == plan.max_restarts) break;
    const auto& culprit = last.workers[*last.culprit];
    notice(plan, "attempt " + std::to_string(attempt) + " failed (rank " + std::to_string(culprit.rank) + ": " +
                     describeEnd(culprit) + "); restarting (" + std::to_string(attempt + 1) + " of " +
                     std::to_string(plan.max_restarts) + ")");
  }
  supervisor.finish();
  server->stop();
  report.exit_code = jobExitCode(report.attempts.back());

  std::string summary = renderFailureSummary(report);
  if (!summary.empty()) writeAll(2, summary.data(), summary.size());
  if (plan.log_dir) {
    auto ok = config::writeFileAtomically(*plan.log_dir + "/summary.json", renderReportJson(report).dump(2) + "\n");
    if (!ok) notice(plan, "could not write summary.json: " + ok.error());
  }
  if (tempRunDir) removeTree(runDir);
  return report;
}

}  // namespace accel::launcher
