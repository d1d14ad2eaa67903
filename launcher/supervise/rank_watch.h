#pragma once
// What the agent knows of each rank's progress, and the rule that calls a job hung.
//
// Progress comes from two places: heartbeats (each rank ADDs 1 to "accel_step/<rank>" in the
// job's store at every step it begins: libaccel's Accelerator does, any worker can; the store
// tells the ProgressBoard of every write) and, for workers that send none, their output and
// main thread's CPU time (sampled from /proc by the supervisor).
//
// A job is hung (judgeHang) when a rank has not moved for the hang timeout while every other
// running rank has either moved past it (a higher step) or waits too (has not moved for half
// the timeout). The stuck ranks are those at the lowest step; when the steps do not tell them
// apart, the stacks do (judgeByStacks): a rank whose stack is inside a collective waits for
// the others, one elsewhere is stuck; or the one whose stack differs from all the others'.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launcher/plan/worker_env.h"

namespace accel::launcher {

using SteadyClock = std::chrono::steady_clock;

// A rank's own work over its last steps: the work it reported (microseconds, its heartbeat's
// $ACCEL_WORK_KEY) between the step counts `from_step` and `to_step`.
struct WorkWindow {
  int64_t from_step = 0;
  int64_t to_step = 0;
  int64_t work_us = 0;
};

// The ranks' heartbeats, and the work each reports with them. onWrite is called from the store's
// thread, the rest from the supervisor's: every method is thread-safe and never blocks for long.
class ProgressBoard {
 public:
  struct Entry {
    int64_t step = 0;
    SteadyClock::time_point changed;
  };
  // A stored heartbeat key and its new value ("/accel_step/3", "1042"), or a work key's
  // ("/accel_work_us/3", "5120000"); anything else is ignored.
  void onWrite(const std::string& storedKey, const std::string& value);
  std::map<int, Entry> snapshot() const;
  // Each rank's work over its last `steps` steps at least (the newest span it can measure that
  // long); ranks that have not reported work over that many steps are left out. Work is kept for
  // the last `steps` given to keepWorkFor (default 20).
  std::map<int, WorkWindow> workWindows() const;
  void keepWorkFor(int64_t steps);
  void clear();  // a new attempt starts from nothing

 private:
  struct WorkSample {
    int64_t step = 0;
    int64_t work_us = 0;  // the rank's work total when its step count became `step`
  };
  void onStep(int rank, int64_t step);

  mutable std::mutex mutex_;
  std::map<int, Entry> entries_;
  std::map<int, int64_t> work_;                     // each rank's work total, microseconds
  std::map<int, std::vector<WorkSample>> samples_;  // oldest first, pruned to the window
  int64_t window_ = 20;
};

// A process as /proc shows it: its state letter, CPU time and resident memory, and its main
// thread's CPU time: what a training loop runs on. Without heartbeats, the hang rule judges a
// rank by its output and its main thread's CPU time only — a background thread (Gloo's, a
// logger, a watchdog) uses a little CPU whatever the main thread does, and must not make a
// rank whose main thread waits look busy.
struct ProcSample {
  char state = '?';        // R, S, D, Z, T ... ('?' when /proc could not be read)
  uint64_t cpu_ticks = 0;  // utime + stime of every thread, in clock ticks
  uint64_t rss_bytes = 0;
  uint64_t main_thread_ticks = 0;  // utime + stime of the main thread (/proc/PID/task/PID)
  char main_thread_state = '?';
};
std::optional<ProcSample> readProcSample(pid_t pid);
long clockTicksPerSecond();

// One running rank, as the hang rule sees it.
struct RankProgress {
  int rank = 0;
  std::optional<int64_t> step;    // its heartbeat, if it sends one
  SteadyClock::time_point moved;  // its heartbeat's last change, else its output's or CPU's
};

struct HangVerdict {
  std::vector<int> stuck;     // the ranks at the lowest step; if no steps differ, every rank
                              // idle for half the timeout (stuckByStacks chooses among them)
  bool steps_differ = false;  // the heartbeats told them apart
  std::string message;        // "rank 3 at step 1042 for 120 s; ranks 0–2, 4–7 at step 1043"
};

// nullopt while the job is not hung (see the header's rule).
std::optional<HangVerdict> judgeHang(const std::vector<RankProgress>& ranks,
                                     SteadyClock::time_point now,
                                     std::chrono::milliseconds timeout);

// Whether a dumped stack (faulthandler's or libaccel's) shows its thread waiting in a
// collective: torch.distributed, c10d, Gloo, NCCL or libaccel's communicators, and the torch
// calls that wait on one inside: DDP's module (its forward's buffer sync) and autograd's
// backward (DDP's reducer all-reduces from it). Of a faulthandler dump, only the thread that
// printed it ("Current thread", the main one) counts: another thread's collective does not make
// the main thread wait.
bool stackShowsCollective(const std::string& stack);

// The innermost frame of a dumped stack's main thread: faulthandler's first `File "..."` line
// after "Current thread", else the first line of libaccel's backtrace; "" when there is none.
std::string innermostFrame(const std::string& stack);

// Which of the ranks judged stuck with equal steps the stacks show stuck.
struct StackVerdict {
  std::vector<int> stuck;  // empty: the stacks cannot tell
  std::string why;         // "outside any collective, ... waiting in one", for the hang message
};

// The ranks whose stacks are not in a collective (or who printed none), when some are and some
// are not; else, when all stacks are alike but one (its innermost frame differs, the others'
// all the same), that one; else nothing: the stacks cannot tell. One candidate stays (why "").
StackVerdict judgeByStacks(const std::vector<int>& candidates,
                           const std::map<int, std::string>& stacks);

// "3", "0–2, 4–7": ranks in ascending runs.
std::string rankRanges(std::vector<int> ranks);

}  // namespace accel::launcher
