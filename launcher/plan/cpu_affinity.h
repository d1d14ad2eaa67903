#pragma once
// CPU affinity for `--enable_cpu_affinity` / `enable_cpu_affinity: true`: which CPUs each local
// rank may run on. The agent computes the sets before spawning (planCpuAffinity, a pure function
// of the machine's topology) and each worker is pinned between fork and exec (spawnWorker).
//
// The rule, NUMA-aware like accelerate's set_numa_affinity:
// - GPU job whose GPUs' NUMA nodes are known: a rank gets every allowed CPU of its GPU's node,
//   shared with the other ranks on that node (accelerate pins each rank to NVML's CPU affinity of
//   its GPU, the whole node, in the same way); an unknown node (-1) means every allowed CPU.
// - Otherwise (a CPU job): ranks are spread over the NUMA nodes in order, in proportion to their
//   allowed CPUs, and each node's CPUs are split evenly and contiguously among its ranks, whole
//   physical cores first (hyperthread siblings stay together while there are enough cores).
// - Fewer allowed CPUs than ranks: the ranks share, one CPU each, round robin (and one notice).
// Only CPUs the agent itself may use (its sched_getaffinity, which reflects a cgroup cpuset or
// taskset) are ever given out.

#include <optional>
#include <string>
#include <vector>

#include "launcher/plan/launch_plan.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// The part of the machine's CPU topology the sets depend on.
struct CpuTopology {
  std::vector<int> allowed;  // CPUs the agent may use, ascending
  std::vector<std::vector<int>>
      nodes;  // NUMA node N's CPUs (ascending), by node number; may be empty
  std::vector<std::vector<int>>
      cores;  // thread-sibling groups (one per physical core), each ascending
};

// What each local rank gets.
struct CpuAffinity {
  std::vector<std::vector<int>> rank_cpus;  // per local rank, ascending, never empty
  std::vector<int> rank_threads;            // per local rank: its share of cores (OMP_NUM_THREADS)
  bool shared = false;                      // fewer allowed CPUs than ranks: ranks share CPUs
};

// The sets for `localRanks` ranks on `topology` (none, i.e. nothing pinned, when `allowed` is
// empty or `localRanks` < 1).
// `gpuNodes`, when given, holds the NUMA node of each local rank's GPU (-1: not known); without
// it the job is treated as a CPU job. A node missing from `topology.nodes`, or all of whose CPUs
// the agent may not use, counts as unknown. A CPU that is in no node (or no core) forms one of its
// own. Pure; never throws.
CpuAffinity planCpuAffinity(const CpuTopology& topology, int localRanks,
                            const std::optional<std::vector<int>>& gpuNodes = std::nullopt);

// For `enable_cpu_affinity` (flag or key): fills plan.rank_cpus, and plan.rank_omp_threads when
// plan.omp_from_affinity, for the plan's local ranks on `topology`, and adds one notice with the
// sets (and one when ranks share CPUs). A GPU job (one accelerate starts with torchrun) is pinned
// to its GPUs' NUMA nodes when `gpuNodes` (per local rank, as gpuNumaNodes gives) knows at least
// one; otherwise it is placed as a CPU job, with a notice saying why. A rank per scheduler task
// (exec_in_place) is left to the scheduler's binding, with a notice. Does nothing when affinity
// is off. Pure; never throws.
void assignCpuAffinity(LaunchPlan& plan, const CpuTopology& topology,
                       const std::optional<std::vector<int>>& gpuNodes = std::nullopt);

// The CUDA device each local rank uses, in the agent's view: the r-th of gpu_ids, or r when
// gpu_ids is unset or "all" (workers see only gpu_ids, and use their local rank's device).
std::vector<int> rankGpuDevices(const LaunchPlan& plan);

// The NUMA node of each of `devices` (CUDA device indices): `busIds[device]` (a PCI bus id as
// CUDA or NVML spell it, "0000:3B:00.0" or "00000000:3B:00.0") looked up as
// <sysRoot>/bus/pci/devices/0000:3b:00.0/numa_node. -1 where not known: no id, no such file, or
// the kernel's own -1 (a machine without NUMA). Reads one small sysfs file per device; thread-safe.
std::vector<int> gpuNumaNodes(const std::vector<std::string>& busIds,
                              const std::vector<int>& devices, const std::string& sysRoot = "/sys");

// The same on this machine: the agent's own sched_getaffinity and /sys, and for a GPU job the
// GPUs' PCI bus ids from the CUDA driver (probes::gpuPciBusIds). Error (naming the system call)
// when the agent's CPUs cannot be read. Reads a few sysfs files (and initialises CUDA for a GPU
// job); call before spawning.
Expected<void> assignCpuAffinity(LaunchPlan& plan);

// Reads the topology under `sysRoot` (normally "/sys": devices/system/node/node*/cpulist and
// devices/system/cpu/cpu*/topology/thread_siblings_list) for the CPUs in `allowed`. Missing files
// mean one node and no SMT. Reads a few small sysfs files; thread-safe.
CpuTopology readCpuTopology(const std::vector<int>& allowed, const std::string& sysRoot = "/sys");

// The CPUs this process may run on (sched_getaffinity), ascending. Error when it cannot be read.
Expected<std::vector<int>> allowedCpus();

// "0-3,8,10-11" ↔ {0,1,2,3,8,10,11} (sysfs and Cpus_allowed_list syntax). Parsing errors name the
// offending item; the result is ascending without duplicates.
Expected<std::vector<int>> parseCpuList(const std::string& text);
std::string formatCpuList(const std::vector<int>& cpus);

}  // namespace accel::launcher
