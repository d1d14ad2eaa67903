#pragma once
// LaunchPlan: what one `accel launch` will do on this machine, decided before anything is
// spawned and never changed after: planLaunch returns it, and every later phase reads it as a
// const value. What the machines' meeting decides (machine rank, rank offset, store port,
// interface) is not in it: that is a Placement (placement.h), a new value per round.
// makeLaunchPlan validates everything it can (script, GPUs, flags); an error here means nothing
// was started and `accel launch` exits 2.

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/effective_config.h"
#include "launcher/plan/accelerate_env.h"
#include "launcher/plan/launch_options.h"
#include "launcher/plan/placement.h"
#include "launcher/plan/round_timeouts.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"

namespace accel::launcher {

struct LaunchPlan {
  // Streams of local rank `lr` (stream_masks.h bits) kept in files: all with a log_dir.
  int fileStreams(int lr) const;
  // Streams of local rank `lr` shown on the console: not redirected (or also teed), and allowed
  // by console_streams and console_ranks.
  int consoleStreams(int lr) const;
  // True when some stream must be kept in a file.
  bool keepsFiles() const;

  config::EffectiveConfig config;
  std::vector<std::string> argv;  // identical for every rank; argv[0] is an absolute path
  // argv[0] is python3 from PATH because nobody chose the interpreter (--python, the config's
  // accel_python, $PYTHON_EXEC): planLaunch takes another where python3 has no torch.
  bool python_by_default = false;
  int world_size = 1;        // processes over all machines
  int local_world_size = 1;  // processes on this machine
  // This machine's rank as asked (flag, file, scheduler); nullopt: the rendezvous ranks it by
  // arrival. The rank it gets is its Placement's.
  std::optional<int> machine_rank = 0;
  // torchrun's elastic command line (--rdzv_backend c10d, no --node_rank): the agent on the
  // endpoint's host hosts the store as machine 0 (planLaunch decides: machine_rank 0), the
  // others are ranked in the order they join (machine_rank nullopt).
  bool rank_by_arrival = false;
  std::optional<bool> store_host_configured;  // is_host= in --rdzv_conf (torch's override)
  int num_machines = 1;                       // the most machines (MAX of --nnodes MIN:MAX)
  // The fewest machines the job runs on: MIN of --nnodes MIN:MAX (elastic membership), else
  // num_machines. A round closes at once with num_machines, or the last call after
  // min_machines joined; a group that falls below it ends the job.
  int min_machines = 1;
  bool elastic() const { return min_machines < num_machines; }
  // Every duration of the job's rounds, one value (round_timeouts.h), filled once by planning:
  // --rdzv_timeout and --rdzv_conf's timeout=, last_call_timeout=, keep_alive_interval=,
  // keep_alive_max_attempt= and close_timeout= (else --term_timeout + close_margin), the exit
  // barrier's bound from --term_timeout, and accel's own waits.
  RoundTimeouts round_timeouts;
  // A rank per scheduler task (--no_spawn, or under MPI): the agent does not spawn; it execs
  // the command as local rank `exec_local_rank`, and rank 0 hosts the store (torch's env://).
  bool exec_in_place = false;
  // The one process is mpirun with --tag-output (Open MPI) or -prepend-rank (MPICH): the console
  // labels each line by the MPI rank in its tag, not as the agent's one "rank 0".
  bool mpi_tagged_output = false;
  int exec_local_rank = 0;
  int exec_rank = 0;                     // the task's global rank
  bool agent_store = true;               // TORCHELASTIC_USE_AGENT_STORE: the agent hosts the store
  std::optional<std::string> scheduler;  // "SLURM", "Open MPI", "PMI" when one gave the machines
  bool master_addr_from_scheduler = false;  // master_addr is a SLURM node name (may need NodeAddr)
  std::string master_addr = "127.0.0.1";
  std::string address_flag = "--main_process_ip";  // where master_addr came from (messages)
  // --rdzv_backend etcd/etcd-v2 across machines: etcd's endpoints (--rdzv_endpoint,
  // HOST:PORT[,...]); the rounds live there and every agent hosts a store of its own, the
  // workers' when its machine is a round's machine 0 (rendezvous/etcd_group.h).
  std::optional<std::string> etcd_endpoints;
  // etcd over TLS (--rdzv_conf protocol=https, as torch's etcd backends take it; https://
  // endpoints too): the CA certificate, this client's certificate and its key (empty: none).
  bool etcd_https = false;
  std::string etcd_cacert, etcd_cert, etcd_key;
  std::optional<int> master_port;  // nullopt: the agent picks a free one
  int max_restarts = 0;
  // Restart even when two attempts in a row failed the same way before any rank completed a
  // step (repeatedFailure, job_report.h); by default such a job stops restarting.
  bool retry_identical_failures = false;
  std::string run_id;
  // The job's name in the rendezvous keys (accel/rdzv/<id>/...), the same on every machine:
  // --rdzv_id, else the scheduler's job id, else "none" (torchrun's default) — never the run id
  // derived from the store's address, which machines may spell differently.
  std::string rendezvous_id = "none";
  // torchrun's elastic command line: whether this machine hosts the rendezvous or joins it, as
  // planned ("" for other jobs). The agent says it once it knows: an agent that only guessed it
  // hosts (the endpoint is this machine) joins instead when another agent here holds the port.
  std::string rendezvous_notice;
  std::string role = "default";
  std::optional<int> omp_num_threads;  // set for workers unless already in the environment
  bool omp_notice = false;             // say so once: OMP_NUM_THREADS was unset and N > 1
  LaunchMode mode = LaunchMode::Accelerate;
  // The launcher accelerate would use for this job (its environment depends on it).
  AccelerateLauncher accelerate_launcher = AccelerateLauncher::Simple;
  // torchrun's per-rank variables (RANK, LOCAL_RANK, ..., TORCHELASTIC_*): every job but
  // accelerate's single process, which its simple launcher starts without them (a worker that
  // sees LOCAL_RANK initialises a process group).
  bool torchrun_env = true;
  std::optional<int> per_machine_processes;  // --nproc_per_node, resolved (auto/gpu/cpu counted)
  bool dry_run_json = false;
  std::optional<std::string>
      local_addr;  // --local_addr: this machine's address as the others reach it
  // --enable_cpu_affinity (launcher/plan/cpu_affinity.h): the CPUs each local rank is pinned to
  // (empty: not pinned) and, when OMP_NUM_THREADS is the agent's to choose, each rank's thread
  // count.
  std::vector<std::vector<int>> rank_cpus;
  bool omp_from_affinity =
      false;  // OMP_NUM_THREADS unset, no flag: each pinned rank gets its cores
  std::vector<int> rank_omp_threads;  // per local rank when omp_from_affinity (worker_env uses it)
  // Variables every rank gets on top of the parent environment (accelerate's ACCELERATE_*,
  // KMP_*, CUDA_VISIBLE_DEVICES ...); rank-specific ones are added by workerEnvironment.
  std::map<std::string, std::string> common_env;
  // With a log_dir every stream of every rank is kept in its file; without one, only those of
  // `redirects | tee` (in a directory the agent makes and keeps, as torchrun does).
  std::optional<std::string> log_dir;
  std::vector<int>
      redirects;  // per local rank, stream masks (stream_masks.h): to a file, not the console
  std::vector<int> tee;     // per local rank: to a file and the console
  int console_streams = 3;  // bit 1: stdout may reach the console, bit 2: stderr may
  std::optional<std::set<int>> console_ranks;  // local ranks shown on the console (all if unset)
  bool quiet = false;
  bool dry_run = false;
  std::chrono::milliseconds term_timeout{5000};
  // --virtual_local_rank (torch 2.12): every worker sees LOCAL_RANK=0 and, as CUDA_VISIBLE_DEVICES,
  // only its GPU: virtual_devices[local rank] (from CUDA_VISIBLE_DEVICES or gpu_ids, else the
  // local rank itself).
  bool virtual_local_rank = false;
  std::vector<std::string> virtual_devices;
  // --duplicate_stdout_filters / --duplicate_stderr_filters (torch 2.12): a teed stream's line
  // containing any of [0] (stdout) or [1] (stderr) is also written, prefixed "[<role><local
  // rank>]:", to attempt_K/filtered_stdout.log or filtered_stderr.log (run_dir.h).
  std::array<std::vector<std::string>, 2> duplicate_filters;
  // Before each round of a multi-machine job (probes/health.h): --health_check's command (unset:
  // the built-in checks alone), how long it may run, and how often a machine that failed the
  // checks looks again.
  std::optional<std::string> health_check;
  std::vector<std::string> health_check_dirs;  // --health_check_dirs: free space, beside the logs'
  std::chrono::milliseconds health_check_timeout{60000};
  std::chrono::milliseconds health_check_interval{30000};
  // Straggler scores (launcher/supervise/stragglers.h): the threshold a rank's score falls below
  // to be named, the steps it is scored over, and whether a straggler's machine is excluded.
  double straggler_threshold = 0.7;
  int straggler_window = 20;
  bool straggler_exclude = false;
  // --hang_timeout / the config's hang_timeout: no progress for this long is a hang (unset: off).
  std::optional<std::chrono::milliseconds> hang_timeout;
  // --exit_timeout / the config's exit_timeout: once a rank exited 0, how long the others get
  // before they are stopped as hung (unset: a notice after exit_notice, nothing stopped).
  std::optional<std::chrono::milliseconds> exit_timeout;
  std::chrono::milliseconds exit_notice{60000};
  uint64_t store_connection_input_bytes = 128ull << 20;  // --store_connection_input_limit
  uint64_t store_input_budget_bytes = 1ull << 30;        // --store_input_budget
  std::vector<std::string> notices;  // one-line notices for the user (ignored flags and the like)
  // accelerate's warning for a launch without a config file: which values no flag gave and the
  // defaults used (several lines); "" when a config file or the flags gave them all.
  std::string defaults_notice;
};

// The port every machine of a scheduled job agrees on without talking, when none was given:
// 20000 + job id mod 10000 (below the ephemeral range; different jobs rarely collide), else 29500.
int portForJob(const std::optional<std::string>& jobId);

// The placement of a job whose machines need no meeting (one machine, or a rank per scheduler
// task), with the store at `storePort`.
Placement staticPlacement(const LaunchPlan& plan, int storePort);

// Resolves config precedence, the command, sizes and the workers' common environment.
// Under a scheduler (probes/scheduler_env.h) its machines, ranks and run id are used where
// no flag says otherwise: flag > scheduler > config file > default.
// `usableGpus` counts the GPUs the agent can see; it is called at most once, and only when GPUs
// matter (a GPU job, fp16, --nproc_per_node auto/gpu, or several processes with neither a config
// file nor --cpu, where accelerate turns multi-GPU on when it sees more than one GPU), so CPU
// launches with a config or --cpu never load CUDA. --dry_run_gpus N replaces it by N. Reads the
// config file, the script and PATH (a relative script is resolved against the current directory);
// nothing else blocks. Errors are returned, never thrown.
Expected<LaunchPlan> makeLaunchPlan(const LaunchOptions& options, const config::PathEnv& paths,
                                    const probes::Environment& parentEnv,
                                    const std::function<int()>& usableGpus);

}  // namespace accel::launcher
