#pragma once
// PosixProcesses: the real Processes (processes.h) — workers started by spawnWorker, signalled
// and reaped with the system calls of subprocess_posix.h, sampled from /proc, and watched by the
// guard (guard.h), which kills their groups if the agent itself is SIGKILLed.

#include <set>
#include <string>

#include "launcher/supervise/guard.h"
#include "launcher/supervise/processes.h"

namespace accel::launcher {

class PosixProcesses : public Processes {
 public:
  PosixProcesses() = default;
  PosixProcesses(const PosixProcesses&) = delete;
  PosixProcesses& operator=(const PosixProcesses&) = delete;

  // Makes this process the reaper of its orphans, removes the shared-memory segments dead jobs
  // left, and forks the guard (which deletes `dirToRemoveIfKilled`, when not empty, after
  // killing the workers' groups if the agent dies). Call once from the agent's main thread,
  // after the supervisor blocked its signals.
  Expected<void> start(const std::string& dirToRemoveIfKilled);
  // The job ended cleanly: the guard exits without killing anything.
  void finish();

  Expected<pid_t> spawn(const SpawnSpec& spec) override;
  void spawnedAll() override;
  std::optional<Reaped> endedUnreaped(pid_t pid) override;
  void reap(pid_t pid) override;
  void signalGroup(pid_t leader, int sig) override;
  void signalProcess(pid_t pid, int sig) override;
  std::vector<pid_t> otherChildren() override;
  std::optional<ProcSample> sample(pid_t pid) override;

 private:
  Guard guard_;
  std::set<pid_t> inherited_;  // children from before start(): never signalled
};

}  // namespace accel::launcher
