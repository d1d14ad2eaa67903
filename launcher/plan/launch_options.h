#pragma once
// LaunchOptions: everything `accel launch` / `accel run` was told on its command line, as the
// planner's input. launchOptionsFrom (launcher/cli/options_from_flags.h) fills it from the parsed
// flags; makeLaunchPlan (launcher/plan/launch_plan.h) turns it, with the config file and this
// machine, into a LaunchPlan. Nothing here knows the flag table.

#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/effective_config.h"

namespace accel::launcher {

// Which command line is being parsed: `accel launch` (accelerate's defaults: the config file,
// ACCELERATE_* variables) or `accel run` / a binary named torchrun (torchrun's defaults: no config
// file, no accelerate variables; PET_<FLAG> environment variables give flag defaults).
enum class LaunchMode { Accelerate, Torchrun };

// accelerate's argument namespace as its parser leaves it: every flag's value (defaults
// included, converted as accelerate converts them) and which flags were given. Only
// accelerate_env.h reads it, to build the environment accelerate's launcher would.
struct AccelerateNamespace {
  std::map<std::string, nlohmann::json> values;
  std::set<std::string> given;
  bool isGiven(const std::string& dest) const { return given.count(dest) != 0; }
};

struct LaunchOptions {
  LaunchMode mode = LaunchMode::Accelerate;  // accel launch, or accel run / torchrun
  AccelerateNamespace accelerate;            // accelerate's view of every flag (accelerate_env.h)
  config::ConfigOverrides config;            // flags shared with `accel config show`
  // torchrun's spellings that are not plain aliases of accelerate's:
  std::optional<std::string> nproc_per_node;  // processes per machine: N, auto, gpu, cpu
  // The flag that named the store's address, for messages: --main_process_ip, --master_addr
  // or --rdzv_endpoint.
  std::string address_flag = "--main_process_ip";
  // --rdzv_endpoint as given with --rdzv_backend etcd/etcd-v2: etcd's HOST:PORT[,HOST:PORT...].
  std::optional<std::string> etcd_endpoints;
  std::string nproc_per_node_flag = "--nproc_per_node";  // as the user spelled it, for messages
  bool run_path = false;                  // run the script with python whatever its suffix
  std::optional<std::string> rdzv_id;     // TORCHELASTIC_RUN_ID and the log directory's prefix
  std::vector<std::string> notices;       // accepted flags that do nothing here, one line each
  bool dry_run_json = false;              // --dry_run_json: the dry run as one JSON object
  std::optional<std::string> local_addr;  // --local_addr: this machine's address for the others
  std::optional<int> dry_run_gpus;        // with a dry run: plan as if N GPUs were usable
  std::vector<std::string> command;       // SCRIPT.py|BINARY|MODULE and its arguments, untouched
  bool module = false;                    // -m: run command[0] as a Python module
  bool no_python = false;                 // --no_python: run command[0] directly
  std::optional<std::string> python;      // --python (else $PYTHON_EXEC, else python3)
  std::optional<int> num_cpu_threads_per_process;
  std::optional<int> gradient_accumulation_steps;
  int max_restarts = 0;
  bool retry_identical_failures = false;  // restart even a failure that repeats itself
  double monitor_interval = 0.1;          // accepted for compatibility; supervision is event-driven
  std::optional<std::string>
      log_dir;  // torchrun's layout: LOG_DIR/<run_id>_<random>/attempt_K/<local rank>/
  // torchrun's --redirects and --tee ("3", "0:3,1:1"; launcher/plan/stream_masks.h): the streams
  // kept in log files instead of (redirects) or as well as (tee) on the console.
  std::optional<std::string> redirects;
  std::optional<std::string> tee;
  std::optional<int> console_streams;  // 0 none, 1 stdout, 2 stderr, 3 both (default: both)
  std::optional<std::string> local_ranks_filter;  // "0,2": console shows only these local ranks
  bool quiet = false;                             // no agent notices, only worker output and errors
  // torchrun's k=v,...: timeout/join_timeout, is_host, last_call_timeout, keep_alive_interval,
  // keep_alive_max_attempt are read (agent_settings.cc)
  std::string rdzv_conf;
  // --nnodes MIN:MAX: the fewest machines the job runs on (config.num_machines holds MAX).
  std::optional<int> min_machines;
  std::optional<double>
      rdzv_timeout_s;  // --rdzv_timeout: how long agents wait for each other (900 s)
  std::string role = "default";
  bool dry_run = false;
  bool no_spawn = false;  // --no_spawn: this scheduler task is one rank (exec, no agent)
  std::chrono::milliseconds term_timeout{5000};  // SIGTERM → SIGKILL grace period
  bool term_timeout_given = false;  // --term_timeout or --shutdown_timeout (else the environment's)
  bool virtual_local_rank = false;  // --virtual_local_rank: LOCAL_RANK=0, one GPU per worker
  // --duplicate_stdout_filters / --duplicate_stderr_filters (torch 2.12): [0] stdout, [1] stderr.
  std::array<std::vector<std::string>, 2> duplicate_filters;
  std::optional<double>
      hang_timeout_s;  // --hang_timeout (else the config's hang_timeout; else off)
  std::optional<double>
      exit_timeout_s;  // --exit_timeout (else the config's exit_timeout; else a notice)
  std::optional<std::string> health_check;     // --health_check CMD
  std::vector<std::string> health_check_dirs;  // --health_check_dirs DIR,DIR
  double health_check_interval_s = 30;         // --health_check_interval
  double health_check_timeout_s = 60;          // --health_check_timeout
  double straggler_threshold = 0.7;            // --straggler_threshold
  int straggler_window = 20;                   // --straggler_window (steps)
  bool straggler_exclude = false;              // --straggler_action exclude
  // The job store's memory bounds ("128M", "1G", bytes): what one connection's unfinished
  // request may hold, and all connections together (TcpStoreServerOptions).
  std::optional<std::string> store_connection_input_limit;
  std::optional<std::string> store_input_budget;
};

}  // namespace accel::launcher
