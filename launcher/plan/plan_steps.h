#pragma once
// The steps of makeLaunchPlan (launch_plan.h) that live outside launch_plan.cc, private to
// launcher/plan: what every worker runs and inherits (worker_setup.cc) and how the agent itself
// behaves (agent_settings.cc). launch_plan.cc calls them in order; each fills its part of the plan.

#include <optional>
#include <string>
#include <vector>

#include "launcher/plan/accelerate_env.h"
#include "launcher/plan/launch_plan.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"
#include "probes/scheduler_env.h"

namespace accel::launcher::detail {

// The GPU facts the plan depends on, known once the config is resolved.
struct Devices {
  bool gpu = false;     // a GPU job: MULTI_GPU, FSDP, DEEPSPEED or MEGATRON_LM
  int usable_gpus = 0;  // counted only when GPUs matter
  AccelerateLauncher launcher = AccelerateLauncher::Simple;
};

// The argv every rank runs, with argv[0] resolved to a path (a relative script against the
// current directory, a program through PATH). A .py script or -m runs under --python, else the
// config's accel_python, else $PYTHON_EXEC, else python3 (then plan.python_by_default is set).
// Reads plan.config (effectiveConfig first).
Expected<std::vector<std::string>> resolveCommand(LaunchPlan& plan, const LaunchOptions& o,
                                                  const probes::Environment& env);

// The workers' common environment: accelerate's variables (accel launch), and NCCL's async
// error handling unless the user chose; mpirun wraps the command for accelerate's MPI CPU jobs.
Expected<void> setCommonEnv(LaunchPlan& plan, const LaunchOptions& o,
                            const probes::Environment& env, const Devices& d);

// OMP_NUM_THREADS for the workers (the flag, the user's, accelerate's, a scheduler's share, or
// torchrun's 1).
void chooseOmpThreads(LaunchPlan& plan, const LaunchOptions& o, const probes::Environment& env,
                      const std::optional<probes::SchedulerInfo>& scheduler);

// Console, logs, restarts, role and the store's memory bounds, checked against the job's size.
Expected<void> applyAgentFlags(LaunchPlan& plan, const LaunchOptions& o);

// torch's environment for the agent: TORCH_ELASTIC_SHUTDOWN_TIMEOUT (seconds) when neither
// --term_timeout nor --shutdown_timeout was given.
Expected<void> applyShutdownTimeoutEnv(LaunchPlan& plan, const LaunchOptions& o,
                                       const probes::Environment& env);

// --virtual_local_rank: each local rank's one visible GPU (after setCommonEnv, whose gpu_ids
// give CUDA_VISIBLE_DEVICES; else the agent's own). An error when a rank has none.
Expected<void> assignVirtualDevices(LaunchPlan& plan, const LaunchOptions& o,
                                    const probes::Environment& env);

// The run id every machine of the job agrees on without talking.
void chooseRunId(LaunchPlan& plan, const LaunchOptions& o);

// --hang_timeout and --exit_timeout (or the config's keys).
void applyWatchdogTimeouts(LaunchPlan& plan, const LaunchOptions& o);

// How long agents wait for each other; notices for rendezvous flags that do nothing here.
Expected<void> applyRendezvousFlags(LaunchPlan& plan, const LaunchOptions& o);

}  // namespace accel::launcher::detail
