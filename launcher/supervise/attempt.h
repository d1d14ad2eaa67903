#pragma once
// The inside of Supervisor::runAttempt (supervisor.h): one attempt's workers and the loop that
// supervises them. Private to supervise/: attempt.cc has the spawning, the loop, the handlers and
// the tear-down; attempt_watch.cc what watches a running job (progress samples, hang detection,
// the exit guard, `accel status` answers); supervisor.cc the rounds around the attempts. Time comes
// from the supervisor's Clock and processes are reached through its Processes (processes.h), never
// directly.

#include <chrono>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/supervise/oom.h"
#include "launcher/supervise/output_prefixer.h"
#include "launcher/supervise/processes.h"
#include "launcher/supervise/rank_watch.h"
#include "launcher/supervise/stragglers.h"
#include "launcher/supervise/supervisor.h"

namespace accel::launcher {

inline constexpr size_t kTailLines = 20;

// The last lines of a stream, for the failure summary. A '\r'-redrawn line keeps its last state.
class TailBuffer {
 public:
  void feed(const char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      char c = data[i];
      if (c == '\n') {
        push();
      } else if (c == '\r') {
        partial_.clear();
      } else if (partial_.size() < 4096) {
        partial_ += c;
      }
    }
  }
  std::vector<std::string> lines() {
    if (!partial_.empty()) push();
    return {lines_.begin(), lines_.end()};
  }

 private:
  void push() {
    lines_.push_back(partial_);
    partial_.clear();
    if (lines_.size() > kTailLines) lines_.pop_front();
  }
  std::deque<std::string> lines_;
  std::string partial_;
};

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;  // while > 0 and not reaped, its process-group id is ours
  bool running = false;
  int fds[2] = {-1, -1};      // read ends: stdout, stderr
  int log_fds[2] = {-1, -1};  // log files, when logging
  OutputPrefixer prefixers[2] = {OutputPrefixer(""), OutputPrefixer("")};
  TailBuffer stderr_tail;
  std::string error_file;
  WorkerOutcome outcome;
  int console_streams = 3;  // stream_masks.h bits: the streams shown on the console
  // --duplicate_*_filters: whether its stream [0] stdout / [1] stderr is matched, and the
  // stream's unfinished last line.
  bool duplicating[2] = {false, false};
  std::string duplicate_partial[2];

  // What watches it (attempt_watch.cc): when it last wrote a line, its last /proc sample and when
  // its CPU time last moved, and what it printed after the agent asked for its stack.
  Clock::time_point started{}, last_output{}, cpu_moved{};
  std::optional<ProcSample> sample;
  std::string stack;

  // What the failure report shows of its stderr: a spawn error if it never started, else the
  // last lines it wrote.
  std::vector<std::string> stderrTail() {
    // Asked for its stack: the lines before it (the stack is reported apart).
    return outcome.stderr_tail.empty() && !outcome.stack_asked ? stderr_tail.lines()
                                                               : outcome.stderr_tail;
  }
};

inline uint64_t pipeId(const Worker& w, int stream) {
  return (static_cast<uint64_t>(w.local_rank) << 1) | static_cast<uint64_t>(stream);
}

// Identifiers of the loop's descriptors other than the workers' pipes (pipeId): the supervisor
// adds them, the attempt dispatches them.
inline constexpr uint64_t kSignalsId = ~0ull;
inline constexpr uint64_t kLinkId = ~1ull;
inline constexpr uint64_t kConsoleId = ~2ull;
inline constexpr uint64_t kStatusId = ~3ull;

// Adds `fd` to the loop `epollFd` as `id`, waiting for `events` (or changes them when it is
// there already). Never fails loudly: a descriptor that cannot be watched stays silent.
void watchFd(int epollFd, int fd, uint64_t id, uint32_t events);

class Supervisor::Attempt {
 public:
  Attempt(Supervisor& s, int attempt, const Placement& placement, RoundLink* link)
      : s_(s),
        plan_(s.plan_),
        parts_(s.parts_),
        processes_(s.parts_.processes),
        placement_(placement),
        link_(link),
        attempt_(attempt),
        buf_(65536) {
    report_.attempt = attempt;
  }

  AttemptReport run() {
    start_ = now();
    next_tick_ = start_ + kTick;
    oom_before_ = readOomKillCount();
    if (parts_.board) parts_.board->clear();
    prepareWorkers();
    spawnWorkers();
    superviseUntilDone();
    tearDown();
    return finalReport();
  }

 private:
  enum class Publication { kNone, kPending, kDone };

  // ---- Phases ----
  void prepareWorkers();
  void spawnWorkers();
  bool spawn(Worker& w);
  void superviseUntilDone();
  void tearDown();
  AttemptReport finalReport();

  // ---- The loop ----
  bool finished() const;
  Clock::time_point nextWake() const;
  void dispatch(uint64_t id);
  void afterBatch();

  // ---- Handlers ----
  void onSignals();
  void onAgentSignal(int sig);
  void killAfterTheGrace();
  void onChildren(pid_t firstEnded);
  void onWorkerExit(Worker& w, int exitCode, int signal);
  void onOutput(Worker& w, int stream);
  void onLinkEvents();
  void onRemoteFailure(JobFailure failure);
  void onGroupGrows(std::string why, int excluded);
  void onConsoleReady();

  // ---- Actions ----
  void stopTheOthers();
  void giveTheRestTheGrace(const Worker& ended);
  void sayWhoGetsTheGrace();
  void signalRunning(int sig, bool collateral);
  void killOverdue();
  void publishFirstFailure();
  JobFailure myFailure();
  void readOutput(bool on);
  void openFilteredLogs();
  void duplicateLines(Worker& w, int stream, std::string_view data, bool atEnd);
  uint32_t pipeEvents() const;
  void killLeftovers();
  // A notice ("accel: " and a newline are added), unless the plan is quiet.
  void say(const std::string& text);
  Clock::time_point now() const { return parts_.clock.now(); }

  // ---- Watching a running job (attempt_watch.cc) ----
  static constexpr std::chrono::milliseconds kTick{500};
  // How often a machine of a multi-machine job shares its status with the others (RoundLink).
  static constexpr std::chrono::seconds kShareEvery{2};
  // How long the ranks get to print their stacks after SIGABRT before SIGKILL.
  static constexpr std::chrono::seconds kDumpGrace{10};
  void onTick();
  void sampleRanks();
  std::vector<RankProgress> progress() const;
  void watchForHang();
  void watchForStragglers();
  void exclude(const StragglerScore& straggler);
  void guardExit();
  void stopHung(HangReport hang, bool refineByStacks);
  void keepStack(Worker& w, const char* data, size_t size);
  void settleHangReport();
  void onStatusClients();
  nlohmann::json statusJson() const;

  Supervisor& s_;
  const LaunchPlan& plan_;
  SupervisorParts& parts_;
  Processes& processes_;
  const Placement placement_;
  RoundLink* const link_;  // the round's link to the other machines; nullptr on one machine
  const int attempt_;
  AttemptReport report_;
  std::vector<Worker> workers_;
  std::vector<char> buf_;
  Clock::time_point start_;
  std::optional<uint64_t> oom_before_;
  bool stopping_ = false;  // SIGTERM sent; SIGKILL at kill_deadline_
  Clock::time_point kill_deadline_{};
  // After Ctrl-C every rank gets SIGINT and most end of it within moments of the first: the
  // grace notice waits kGraceNoticeSettle and names the ranks still running then, if any.
  static constexpr std::chrono::milliseconds kGraceNoticeSettle{300};
  struct GraceNotice {
    int ended_local_rank;
    Clock::time_point at;
  };
  std::optional<GraceNotice> grace_notice_;
  std::optional<Clock::time_point> culprit_end_;
  Publication publication_ = Publication::kNone;
  Clock::time_point publish_deadline_{};
  bool output_paused_ = false;
  int filtered_fds_[2] = {-1, -1};  // --duplicate_*_filters' files, stdout and stderr
  Clock::time_point next_tick_{}, next_share_{};
  std::optional<Clock::time_point> first_clean_exit_;  // a rank exited 0 while others ran
  bool exit_notice_given_ = false;
  bool refine_by_stacks_ = false;  // the hang's stuck ranks are chosen by their stacks at the end
  StragglerWatch stragglers_{plan_.straggler_threshold};
  bool exclusion_asked_ = false;      // a straggler's machine is being excluded
  std::set<int> exclusion_refusals_;  // machines said not to be excluded, and why, once each
};

}  // namespace accel::launcher
