#include "launcher/supervise/posix_processes.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>

#include "libaccel/comm/shm_segment.h"

namespace accel::launcher {

int MonotonicClock::wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now()).count();
  // +1: epoll_wait rounds down; waking a millisecond late never wakes before the deadline.
  return ::epoll_wait(epollFd, events, maxEvents, static_cast<int>(std::max<int64_t>(left, 0)) + 1);
}

Expected<void> PosixProcesses::start(const std::string& dirToRemoveIfKilled) {
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
  children.erase(std::remove(children.begin(), children.end(), guard_.pid()), children.end());
  return children;
}

std::optional<ProcSample> PosixProcesses::sample(pid_t pid) { return readProcSample(pid); }

}  // namespace accel::launcher
