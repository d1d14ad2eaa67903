#pragma once
// Placement: what the machines' meeting decided for this machine in one round — as torch
// elastic's WorkerGroup is to its WorkerSpec, a Placement is to the LaunchPlan: the plan is fixed
// when planning ends; each round (a rendezvous of the machines, or none on one machine) hands
// its attempt a new Placement value. Workers see it as GROUP_RANK, RANK, WORLD_SIZE,
// GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and GLOO_SOCKET_IFNAME.

#include <optional>
#include <string>

namespace accel::launcher {

struct Placement {
  int machine_rank = 0;                   // GROUP_RANK
  int num_machines = 1;                   // GROUP_WORLD_SIZE
  int rank_offset = 0;                    // the global rank of this machine's local rank 0
  int world_size = 1;                     // processes over all machines
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: where the job's store is
  int master_port = 0;                    // MASTER_PORT: the store's port (0: not bound yet)
  // GLOO_SOCKET_IFNAME for the workers (the interface that reaches the other machines), unless
  // the user set it: chosen by chooseSocketInterface (worker_env.h).
  std::optional<std::string> socket_interface;
  // TORCHELASTIC_RESTART_COUNT, as the job's master counts it (multi-machine rounds: a group
  // re-formed for a machine that joins does not count); nullopt: the round's number (one
  // machine, where every new round is a restart).
  std::optional<int> restart_count;

  int globalRank(int localRank) const { return rank_offset + localRank; }
};

}  // namespace accel::launcher
