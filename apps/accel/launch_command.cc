#include "apps/accel/launch_command.h"

#include <spdlog/spdlog.h>

#include "apps/accel/config_flags.h"
#include "launcher/launch.h"

namespace accel::apps {

void registerLaunchCommand(CLI::App& app, LaunchCommandOptions& o) {
  auto& l = o.launch;
  o.command = app.add_subcommand("launch", "Launch a training script on N processes (accelerate/torchrun compatible):\n  accel launch [flags] SCRIPT.py|BINARY [args...]");
  o.command->prefix_command();  // the script and everything after it are passed on untouched
  addConfigOverrideFlags(*o.command, l.config);
  o.command->add_flag("-m,--module", l.module, "Run the script as a Python module (python -m)");
  o.command->add_flag("--no_python,--no-python", l.no_python, "Run the script directly, not through python");
  o.command->add_option("--python", l.python, "Python interpreter for .py scripts (default: $PYTHON_EXEC or python3)");
  o.command->add_option("--num_cpu_threads_per_process,--num-cpu-threads-per-process", l.num_cpu_threads_per_process,
                        "OMP_NUM_THREADS for each process");
  o.command->add_option("--gradient_accumulation_steps,--gradient-accumulation-steps", l.gradient_accumulation_steps,
                        "ACCELERATE_GRADIENT_ACCUMULATION_STEPS for the workers");
  o.command->add_option("--max_restarts,--max-restarts", l.max_restarts, "Restart the job up to K times after a failure");
  o.command->add_option("--monitor_interval,--monitor-interval", l.monitor_interval,
                        "Accepted for compatibility; accel reacts to exits at once");
  o.command->add_option("--log_dir,--log-dir", l.log_dir,
                        "Keep every rank's stdout/stderr in LOG_DIR/attempt_K/rank_N/ and write summary.json");
  o.command->add_option("-t,--tee", l.tee, "Worker streams shown on the console: 0 none, 1 stdout, 2 stderr, 3 both");
  o.command->add_option("--local_ranks_filter,--local-ranks-filter", l.local_ranks_filter,
                        "Show only these local ranks on the console, e.g. 0 or 0,2");
  o.command->add_flag("-q,--quiet", l.quiet, "No agent notices; worker output and the failure summary only");
  o.command->add_option("--rdzv_conf,--rdzv-conf", l.rdzv_conf, "torchrun's rendezvous settings; timeout=SECONDS is used");
  o.command->add_option("--rdzv_timeout,--rdzv-timeout", l.rdzv_timeout_s,
                        "Seconds the machines of a multi-machine job wait for each other (default 900)");
  o.command->add_option("--role", l.role, "ROLE_NAME for the workers");
  o.command->add_flag("--no_spawn,--no-spawn", l.no_spawn,
                      "Under srun/mpirun: this task is one rank (from SLURM_PROCID/OMPI_COMM_WORLD_RANK); exec it, spawn nothing");
  o.command->add_flag("--dry_run,--dry-run", l.dry_run, "Print each rank's command and environment; start nothing");
  o.command->add_option("--term_timeout,--term-timeout", o.term_timeout_s,
                        "Seconds between SIGTERM and SIGKILL when stopping workers (default 5)");
  o.command->add_option("--store_connection_input_limit,--store-connection-input-limit",
                        l.store_connection_input_limit,
                        "Most the job's store holds of one connection's unfinished request (default 128M)");
  o.command->add_option("--store_input_budget,--store-input-budget", l.store_input_budget,
                        "Most the job's store holds of unfinished requests over all connections (default 1G)");
}

int runLaunchCommand(LaunchCommandOptions& o) {
  o.launch.command = o.command->remaining();
  if (!o.launch.command.empty() && o.launch.command[0].size() > 1 && o.launch.command[0][0] == '-') {
    spdlog::error("unknown flag '{}' (accel launch flags go before the script)", o.launch.command[0]);
    return 2;
  }
  if (o.term_timeout_s < 0) {
    spdlog::error("--term_timeout: must be 0 or more");
    return 2;
  }
  o.launch.term_timeout = std::chrono::milliseconds(static_cast<long long>(o.term_timeout_s * 1000));
  auto report = launcher::launch(o.launch);
  if (!report) {
    spdlog::error("{}", report.error());
    return 2;
  }
  return report->exit_code;
}

}  // namespace accel::apps
