#pragma once
// planLaunch: the planner of `accel launch` — what the agent does on this machine, decided once.

#include "launcher/plan/launch_options.h"
#include "launcher/plan/launch_plan.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"

namespace accel::launcher {

// makeLaunchPlan (launch_plan.h) over the process's environment, the config file and this
// machine's GPUs, then what only this machine's facts decide — the CPUs of each rank
// (enable_cpu_affinity), the address of a SLURM master whose node name does not resolve here,
// whether this agent hosts a c10d rendezvous (the endpoint is this machine, or is_host=), and,
// where nobody chose the interpreter and python3 has no torch, another that has it (a notice).
// Blocking: reads the config file, /proc and /sys, and may run `scontrol`, python3 (≤ 5 s each
// candidate) or resolve host names. The result is final: nothing changes a LaunchPlan after this.
Expected<LaunchPlan> planLaunch(const LaunchOptions& options, const probes::Environment& parentEnv);

}  // namespace accel::launcher
