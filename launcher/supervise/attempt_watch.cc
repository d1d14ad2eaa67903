// What watches a running attempt (attempt.h): every tick the supervisor samples its
// ranks' CPU time and memory from /proc, judges whether the job hangs (--hang_timeout), keeps
// the exit guard (--exit_timeout) and, between ticks, answers `accel status`.

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "launcher/base/text.h"
#include "launcher/report/stack_frames.h"
#include "launcher/supervise/attempt.h"

namespace accel::launcher {
namespace {

// Main-thread CPU time that counts as moving, per tick: 20 ms (a waiting rank uses next to none).
constexpr uint64_t kCpuTicksThatMove = 2;
constexpr size_t kMaxStackBytes = 256 * 1024;

double secondsSince(Clock::time_point then, Clock::time_point now) {
  return std::chrono::duration<double>(now - then).count();
}

}  // namespace

void Supervisor::Attempt::onTick() {
  const auto now = this->now();
  next_tick_ = now + kTick;
  sampleRanks();
  if (link_ && now >= next_share_) {  // for `accel status` on the other machines
    next_share_ = now + kShareEvery;
    link_->shareStatus(statusJson().dump());
  }
  if (report_.hang || stopping_) return;  // already stopping: nothing more to judge
  watchForStragglers();
  watchForHang();
  if (!report_.hang) guardExit();
}

void Supervisor::Attempt::sampleRanks() {
  const auto now = this->now();
  for (auto& w : workers_) {
    if (!w.running) continue;
    auto sample = processes_.sample(w.pid);
    if (!sample) continue;
    // The main thread's time since it last counted as moving (rank_watch.h: why not the
    // process's); below the threshold the reference stays, so slow creep adds up.
    if (!w.sample || sample->main_thread_ticks >= w.sample->main_thread_ticks + kCpuTicksThatMove)
      w.cpu_moved = now;
    else
      sample->main_thread_ticks = w.sample->main_thread_ticks;
    w.sample = sample;
  }
}

// Each running rank's progress: its heartbeat where it sends one, else its output and its main
// thread's CPU time.
std::vector<RankProgress> Supervisor::Attempt::progress() const {
  const auto beats =
      parts_.board ? parts_.board->snapshot() : std::map<int, ProgressBoard::Entry>{};
  std::vector<RankProgress> ranks;
  for (const auto& w : workers_) {
    if (!w.running) continue;
    RankProgress r;
    r.rank = w.rank;
    if (auto it = beats.find(w.rank); it != beats.end()) {
      r.step = it->second.step;
      r.moved = it->second.changed;
    } else {
      r.moved = std::max(w.last_output, w.cpu_moved);
    }
    ranks.push_back(r);
  }
  return ranks;
}

void Supervisor::Attempt::watchForHang() {
  if (!plan_.hang_timeout) return;
  auto verdict = judgeHang(progress(), now(), *plan_.hang_timeout);
  if (!verdict) return;
  HangReport hang;
  hang.kind = "hang";
  hang.message = verdict->message;
  hang.stuck_ranks = verdict->stuck;
  hang.timeout_s = std::chrono::duration<double>(*plan_.hang_timeout).count();
  say("the job hangs (--hang_timeout " + secondsText(*plan_.hang_timeout) + "): " + hang.message +
      "; asking every rank for its stack (SIGABRT)");
  stopHung(std::move(hang), !verdict->steps_differ);
}

// The ranks' scores over their last --straggler_window steps: a rank that falls below the
// threshold is named once (and said again if it comes back above it). Only the agent that hosts
// the job's store sees the ranks' work (the board).
void Supervisor::Attempt::watchForStragglers() {
  if (!parts_.board) return;
  for (const auto& change :
       stragglers_.update(scoreRanks(parts_.board->workWindows(), plan_.local_world_size))) {
    say(stragglerNotice(change, stragglers_.threshold()));
    if (change.straggles && plan_.straggler_exclude) exclude(change.score);
  }
}

// --straggler_action exclude: the straggler's machine leaves the job at once and the others
// re-form without it (uncounted) — when the job is elastic and keeps MIN machines without it.
// Once per attempt: the re-forming stops the attempt.
void Supervisor::Attempt::exclude(const StragglerScore& straggler) {
  if (exclusion_asked_) return;
  const std::string machine = "machine " + std::to_string(straggler.machine);
  std::string why_not;
  if (!link_) {
    why_not = "a job of one machine has no other to go on with";
  } else if (!plan_.elastic() || placement_.num_machines - 1 < plan_.min_machines) {
    why_not = "the job needs " +
              std::to_string(plan_.elastic() ? plan_.min_machines : placement_.num_machines) +
              " machines and has " + std::to_string(placement_.num_machines) +
              (plan_.elastic() ? "" : " (--nnodes MIN:MAX lets it go on with fewer)");
  } else {
    why_not = link_->exclude(straggler.machine, machine + " is excluded as a straggler's (rank " +
                                                    std::to_string(straggler.rank) + ", score " +
                                                    scoreText(straggler.score) +
                                                    "): the group re-forms without it");
  }
  if (why_not.empty()) {
    exclusion_asked_ = true;
    return;
  }
  if (exclusion_refusals_.insert(straggler.machine).second)
    say(machine + " is not excluded (--straggler_action exclude): " + why_not);
}

// Once a rank has exited 0, the others get --exit_timeout to finish (without it, a notice).
void Supervisor::Attempt::guardExit() {
  if (!first_clean_exit_) return;
  std::vector<int> running;
  for (const auto& w : workers_) {
    if (w.running) running.push_back(w.rank);
  }
  if (running.empty()) return;
  const auto waited = now() - *first_clean_exit_;
  const std::string who = (running.size() == 1 ? "rank " : "ranks ") + rankRanges(running);
  if (!plan_.exit_timeout) {
    if (exit_notice_given_ || waited < plan_.exit_notice) return;
    exit_notice_given_ = true;
    say("a rank exited 0 " + secondsText(plan_.exit_notice) + " ago; " + who +
        " still running (--exit_timeout S stops them after S s, with their stacks)");
    return;
  }
  if (waited < *plan_.exit_timeout) return;
  HangReport hang;
  hang.kind = "exit";
  hang.message = who + " still running " + secondsText(*plan_.exit_timeout) +
                 " after a rank exited 0 (--exit_timeout)";
  hang.stuck_ranks = running;
  hang.timeout_s = std::chrono::duration<double>(*plan_.exit_timeout).count();
  say(hang.message + "; asking them for their stacks (SIGABRT), then stopping them");
  stopHung(std::move(hang), false);
}

// Every running rank gets SIGABRT (the process only: its own children are not asked) and prints
// its stack; those that do not die of it are killed after kDumpGrace. The first stuck rank here
// is the culprit, the others collateral.
void Supervisor::Attempt::stopHung(HangReport hang, bool refineByStacks) {
  refine_by_stacks_ = refineByStacks;
  hang.detected_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (size_t i = 0; i < workers_.size() && !report_.culprit; ++i) {
    if (workers_[i].running &&
        std::count(hang.stuck_ranks.begin(), hang.stuck_ranks.end(), workers_[i].rank)) {
      report_.culprit = i;
    }
  }
  report_.hang = std::move(hang);
  culprit_end_ = now();
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.running) continue;
    w.outcome.stderr_tail = w.stderr_tail.lines();  // before the stack: what it said last
    w.outcome.stack_asked = true;
    if (!report_.culprit || i != *report_.culprit) w.outcome.stopped_by_agent = true;
    processes_.signalProcess(w.pid, SIGABRT);
  }
  stopping_ = true;
  kill_deadline_ = now() + kDumpGrace;
}

void Supervisor::Attempt::keepStack(Worker& w, const char* data, size_t size) {
  const size_t room = kMaxStackBytes - std::min(kMaxStackBytes, w.stack.size());
  w.stack.append(data, std::min(size, room));
}

// With equal steps (or none), the stacks choose (judgeByStacks); when they cannot tell, the
// message says so and no rank is named the culprit.
void Supervisor::Attempt::settleHangReport() {
  if (!report_.hang) return;
  std::map<int, std::string> stacks;
  for (auto& w : workers_) {
    if (!w.outcome.stack_asked) continue;
    w.outcome.stack = demangleStack(w.stack);
    stacks[w.rank] = w.outcome.stack;
  }
  if (!refine_by_stacks_) return;
  HangReport& hang = *report_.hang;
  const StackVerdict verdict = judgeByStacks(hang.stuck_ranks, stacks);
  if (!verdict.why.empty()) hang.message += "; by their stacks " + verdict.why;
  if (verdict.stuck.size() == hang.stuck_ranks.size()) return;
  if (report_.culprit) workers_[*report_.culprit].outcome.stopped_by_agent = true;
  report_.culprit.reset();  // when the stacks cannot tell, no rank is named
  if (verdict.stuck.empty()) return;
  hang.stuck_ranks = verdict.stuck;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].rank != verdict.stuck.front()) continue;
    workers_[i].outcome.stopped_by_agent = false;
    report_.culprit = i;
  }
}

void Supervisor::Attempt::onStatusClients() {
  if (parts_.status) parts_.status->answerAll(statusJson().dump() + "\n");
}

nlohmann::json Supervisor::Attempt::statusJson() const {
  const auto now = this->now();
  const auto beats =
      parts_.board ? parts_.board->snapshot() : std::map<int, ProgressBoard::Entry>{};
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& w : workers_) {
    nlohmann::json r = {{"rank", w.rank}, {"local_rank", w.local_rank}, {"pid", w.pid}};
    auto sample = w.running ? processes_.sample(w.pid) : std::nullopt;
    r["state"] = w.running ? (sample ? std::string(1, sample->state) : "?") : "exited";
    const double alive = secondsSince(w.started, now);
    r["cpu_percent"] = nullptr;
    if (sample && alive > 0)
      r["cpu_percent"] =
          100.0 * static_cast<double>(sample->cpu_ticks) / clockTicksPerSecond() / alive;
    r["rss_bytes"] = sample ? nlohmann::json(sample->rss_bytes) : nlohmann::json(nullptr);
    r["seconds_since_output"] = w.last_output > w.started
                                    ? nlohmann::json(secondsSince(w.last_output, now))
                                    : nlohmann::json(nullptr);
    auto beat = beats.find(w.rank);
    r["step"] = beat != beats.end() ? nlohmann::json(beat->second.step) : nlohmann::json(nullptr);
    r["seconds_since_step"] = beat != beats.end()
                                  ? nlohmann::json(secondsSince(beat->second.changed, now))
                                  : nlohmann::json(nullptr);
    r["exit_code"] =
        w.running || w.pid <= 0 ? nlohmann::json(nullptr) : nlohmann::json(w.outcome.exit_code);
    ranks.push_back(std::move(r));
  }
  nlohmann::json status = parts_.status_facts;
  status["agent_pid"] = ::getpid();
  status["time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  status["uptime_s"] = secondsSince(s_.started_, now);
  status["attempt"] = attempt_;
  status["max_restarts"] = plan_.max_restarts;
  status["hang_timeout_s"] = plan_.hang_timeout
                                 ? nlohmann::json(plan_.hang_timeout->count() / 1000.0)
                                 : nlohmann::json(nullptr);
  if (parts_.health) status["health_checks"] = parts_.health();
  if (!stragglers_.latest().empty()) {
    status["stragglers"] = {{"threshold", stragglers_.threshold()},
                            {"window_steps", plan_.straggler_window},
                            {"scores", stragglerScoresJson(stragglers_.latest())},
                            {"straggling", stragglers_.straggling()}};
  }
  status["ranks"] = std::move(ranks);
  return status;
}

}  // namespace accel::launcher
