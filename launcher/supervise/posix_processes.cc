#include "launcher/supervise/posix_processes.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>

#include "libaccel/comm/shm_segment.h"

namespace accel::launcher {

Expected<void> PosixProcesses::start(const std::string& dirToRemoveIfKilled) {
  // Children this process had before it started anything (`cmd > >(tee log)`: bash forks the
  // substitution's reader, then execs the agent, which inherits it as a child): not ours to
  // signal, ever.
  for (pid_t pid : childrenOfThisProcess()) inherited_.insert(pid);
  becomeSubreaper();
  shm::sweepStaleSegments();  // what dead jobs left in /dev/shm (libaccel's segments)
  return guard_.start(dirToRemoveIfKilled);
}

void PosixProcesses::finish() {
  guard_.finish();
  shm::sweepStaleSegments();  // this job's, if it ended before its ranks all attached
}

Expected<pid_t> PosixProcesses::spawn(const SpawnSpec& spec) {
  auto pid = spawnWorker(spec);
  if (pid) guard_.add(*pid);
  return pid;
}

void PosixProcesses::spawnedAll() { guard_.flush(); }

std::optional<Reaped> PosixProcesses::endedUnreaped(pid_t pid) {
  return launcher::endedUnreaped(pid);
}

void PosixProcesses::reap(pid_t pid) {
  guard_.remove(pid);  // before the pid can be reused: the guard must never signal it again
  launcher::reap(pid);
}

void PosixProcesses::signalGroup(pid_t leader, int sig) { launcher::signalGroup(leader, sig); }

void PosixProcesses::signalProcess(pid_t pid, int sig) { ::kill(pid, sig); }

std::vector<pid_t> PosixProcesses::otherChildren() {
  std::vector<pid_t> children = childrenOfThisProcess();
  children.erase(std::remove_if(children.begin(), children.end(),
                                [this](pid_t pid) {
                                  if (pid == guard_.pid()) return true;
                                  if (!inherited_.count(pid)) return false;
                                  // Waited for as the shell would: reaped once it ended.
                                  if (launcher::endedUnreaped(pid)) {
                                    launcher::reap(pid);
                                    inherited_.erase(pid);
                                  }
                                  return true;
                                }),
                 children.end());
  return children;
}

std::optional<ProcSample> PosixProcesses::sample(pid_t pid) { return readProcSample(pid); }

}  // namespace accel::launcher
