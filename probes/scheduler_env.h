#pragma once
// What a scheduler tells the agent through its environment: SLURM (srun, sbatch) and MPI
// (Open MPI's mpirun, or any PMI launcher). The agent reads these instead of asking for
// machine flags. Pure functions of the environment, so they are unit-tested without a cluster.
//
// Two ways to run under a scheduler:
//  * an agent per node (`srun --ntasks-per-node=1 accel launch ...`): the scheduler gives the
//    machines (nodes), this machine's rank among them and the first node as the master;
//  * a rank per task (`srun -n 8 accel launch --no_spawn ...`, `mpirun -np 8 accel launch ...`):
//    each task becomes one worker, with its rank from the scheduler.

#include <optional>
#include <string>
#include <vector>

#include "libaccel/common/expected.h"
#include "probes/environment.h"

namespace accel::probes {

// Expands SLURM's hostlist syntax: "gpu-a[01-04,07],cpu[1-2]" → gpu-a01 gpu-a02 gpu-a03 gpu-a04
// gpu-a07 cpu1 cpu2. Zero padding is kept ("[08-10]" → 08 09 10); several bracket groups in one
// name multiply ("r[1-2]n[1-2]" → r1n1 r1n2 r2n1 r2n2). Errors name the text and what is wrong.
Expected<std::vector<std::string>> expandHostlist(const std::string& text);

// Expands SLURM's tasks-per-node syntax: "2(x3),1" → 2 2 2 1.
Expected<std::vector<int>> expandTasksPerNode(const std::string& text);

struct SchedulerInfo {
  std::string name;    // "SLURM", "Open MPI", "PMI": for messages
  std::string source;  // the variables it came from, for messages ("SLURM_NODEID=1 ...")
  // The machines of the job (an agent per node).
  std::vector<std::string> hosts;  // nodes of the step, in node-id order; empty when unknown (MPI)
  int num_nodes = 1;
  int node_rank = 0;
  std::optional<std::string> job_id;  // run id shared by every node
  std::optional<int> gpus_on_node;
  std::optional<int> cpus_on_node;
  // This task (a rank per task).
  int num_tasks = 1;
  int task_rank = 0;  // global rank
  int local_task_rank = 0;
  int local_num_tasks = 1;
  bool in_step = true;  // SLURM: inside srun (false in the batch script itself)
};

// The scheduler this process runs under, or nullopt (none: a static launch). Open MPI's
// variables win over SLURM's (mpirun inside an allocation), SLURM's over generic PMI ones.
// Malformed values are errors naming the variable.
Expected<std::optional<SchedulerInfo>> detectScheduler(const Environment& env);

}  // namespace accel::probes
