#include "launcher/supervise/attempt.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/paths.h"
#include "launcher/base/text.h"
#include "launcher/plan/run_dir.h"
#include "launcher/plan/worker_env.h"
#include "launcher/supervise/oom.h"
#include "launcher/supervise/output_prefixer.h"
#include "launcher/supervise/subprocess_posix.h"

namespace accel::launcher {
namespace {

// torch's @record writes {"message": {"message": "...", "extraInfo": {...}}}; keep the message.
std::string readErrorFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_discarded() && j.contains("message")) {
    const auto& m = j["message"];
    if (m.is_object() && m.contains("message") && m["message"].is_string())
      return m["message"].get<std::string>();
    if (m.is_string()) return m.get<std::string>();
  }
  std::string raw = text.str();
  return raw.substr(0, 300);
}

// What each Ctrl-C does, said at once. A rank blocked in a collective (or in C code that does
// not return to Python) may not act on SIGINT: the second Ctrl-C sends SIGTERM, and whatever
// still runs --term_timeout later gets SIGKILL, with no third Ctrl-C needed.
std::string interruptNote(int count, std::chrono::milliseconds termTimeout) {
  const std::string grace = secondsText(termTimeout) + " (--term_timeout)";
  if (count == 1) {
    return "SIGINT forwarded to the workers (a rank blocked in a collective may not see it); "
           "Ctrl-C again sends SIGTERM, and SIGKILL follows " +
           grace + " later";
  }
  if (count == 2) {
    return "second SIGINT: sending SIGTERM to the workers; SIGKILL to those still running " +
           grace + " later (a third Ctrl-C: at once)";
  }
  return "third SIGINT: sending SIGKILL to the workers";
}

}  // namespace

void watchFd(int epollFd, int fd, uint64_t id, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epollFd, EPOLL_CTL_MOD, fd, &ev) != 0)
    ::epoll_ctl(epollFd, EPOLL_CTL_ADD, fd, &ev);
}

// ---- One attempt --------------------------------------------------------------------------
// Its phases, in order: prepare the workers' slots, spawn them, supervise until every worker has
// ended (the loop dispatches each ready descriptor to its handler), tear down (kill what is
// left, reap, read the pipes to the end), and build the report.

void Supervisor::Attempt::say(const std::string& text) { parts_.console.notice(text); }

// torchrun's layout: RUN_DIR/attempt_K/<local rank>/{stdout.log,stderr.log,error.json}, the
// directory made for every rank (error.json is the worker's to write), a log for each stream the
// plan keeps in files.
void Supervisor::Attempt::prepareWorkers() {
  openFilteredLogs();
  workers_.resize(static_cast<size_t>(plan_.local_world_size));
  for (int lr = 0; lr < plan_.local_world_size; ++lr) {
    Worker& w = workers_[static_cast<size_t>(lr)];
    w.local_rank = lr;
    w.rank = placement_.globalRank(lr);
    w.outcome.rank = w.rank;
    w.outcome.local_rank = lr;
    std::string prefix = "[rank " + std::to_string(w.rank) + "] ";
    w.prefixers[0] = OutputPrefixer(prefix, plan_.mpi_tagged_output);
    w.prefixers[1] = OutputPrefixer(prefix, plan_.mpi_tagged_output);
    w.console_streams = plan_.consoleStreams(lr);
    // torchrun duplicates the teed streams of the ranks the console shows.
    const auto at = static_cast<size_t>(lr);
    const bool shownRank = !plan_.console_ranks || plan_.console_ranks->count(lr);
    for (int stream = 0; stream < 2; ++stream) {
      w.duplicating[stream] = filtered_fds_[stream] >= 0 && shownRank && at < plan_.tee.size() &&
                              (plan_.tee[at] & (stream + 1)) != 0;
    }
    // The job goes on without these files if they cannot be made.
    if (auto made = config::makeDirectories(rankDir(parts_.run_dir, attempt_, lr)); !made) {
      say("rank " + std::to_string(w.rank) + ": " + made.error());
    }
    w.error_file = errorFile(parts_.run_dir, attempt_, lr);
    ::unlink(w.error_file.c_str());
    const int files = plan_.fileStreams(lr);
    for (int stream = 0; stream < 2; ++stream) {
      if (!(files & (stream + 1))) continue;
      const std::string path = logFile(parts_.run_dir, attempt_, lr, stream + 1);
      w.log_fds[stream] = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (w.log_fds[stream] < 0) say("cannot write " + path + ": " + std::strerror(errno));
    }
  }
}

// Spawns every worker; a worker that cannot start counts as the culprit, and no more are started.
void Supervisor::Attempt::spawnWorkers() {
  for (auto& w : workers_) {
    if (report_.culprit || !spawn(w)) break;
  }
  processes_.spawnedAll();
}

bool Supervisor::Attempt::spawn(Worker& w) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    w.outcome.stderr_tail = {std::string("cannot create pipes: ") + std::strerror(errno)};
    onWorkerExit(w, 127, 0);
    return false;
  }
  WorkerSlot slot{w.local_rank, placement_.restart_count.value_or(attempt_), w.error_file};
  SpawnSpec spec{plan_.argv, workerEnvironment(plan_, placement_, slot, parts_.parent_env), out[1],
                 err[1]};
  spec.inherit_stdin = w.rank == 0;  // local rank 0 of machine 0: pdb/breakpoint() work there
  if (static_cast<size_t>(w.local_rank) < plan_.rank_cpus.size())
    spec.cpus = plan_.rank_cpus[w.local_rank];
  auto pid = processes_.spawn(spec);
  ::close(out[1]);
  ::close(err[1]);
  if (!pid) {
    ::close(out[0]);
    ::close(err[0]);
    w.outcome.stderr_tail = {pid.error()};
    say("rank " + std::to_string(w.rank) + ": " + pid.error());
    onWorkerExit(w, 127, 0);
    return false;
  }
  w.pid = *pid;
  w.running = true;
  w.started = w.last_output = w.cpu_moved = now();
  w.outcome.pid = *pid;
  for (int stream = 0; stream < 2; ++stream) {
    w.fds[stream] = stream == 0 ? out[0] : err[0];
    ::fcntl(w.fds[stream], F_SETFL, O_NONBLOCK);
    watchFd(s_.epoll_fd_, w.fds[stream], pipeId(w, stream), pipeEvents());
  }
  return true;
}

// ---- The loop -----------------------------------------------------------------------------

// Done when every worker has ended and this machine's failure, if any, is published (or the
// store did not answer within RoundTimeouts::publish).
bool Supervisor::Attempt::finished() const {
  for (const auto& w : workers_) {
    if (w.running) return false;
  }
  return publication_ != Publication::kPending || now() >= publish_deadline_;
}

// The loop's next deadline: the tick, SIGKILL's, the publication's.
Clock::time_point Supervisor::Attempt::nextWake() const {
  Clock::time_point next = next_tick_;
  if (stopping_) next = std::min(next, kill_deadline_);
  if (grace_notice_) next = std::min(next, grace_notice_->at);
  if (publication_ == Publication::kPending) next = std::min(next, publish_deadline_);
  return next;
}

void Supervisor::Attempt::superviseUntilDone() {
  // Signals that arrived before or during spawning (e.g. Ctrl-C at start-up) are handled here.
  onSignals();
  afterBatch();
  epoll_event events[64];
  while (!finished()) {
    int n = parts_.clock.wait(s_.epoll_fd_, events, 64, nextWake());
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) dispatch(events[i].data.u64);
    afterBatch();
  }
}

void Supervisor::Attempt::dispatch(uint64_t id) {
  if (id == kSignalsId) return onSignals();
  if (id == kLinkId) return onLinkEvents();
  if (id == kConsoleId) return onConsoleReady();
  if (id == kStatusId) return onStatusClients();
  Worker& w = workers_[id >> 1];
  const int stream = static_cast<int>(id & 1);
  if (w.fds[stream] >= 0) onOutput(w, stream);
}

// What every pass of the loop checks, whatever woke it.
void Supervisor::Attempt::afterBatch() {
  if (now() >= next_tick_) onTick();
  sayWhoGetsTheGrace();
  killOverdue();
  publishFirstFailure();
  if (output_paused_ || !parts_.console.backlogged()) return;
  readOutput(false);
  if (!parts_.console.backlogged()) readOutput(true);  // drained meanwhile: its signal may be gone
}

// ---- Handlers -----------------------------------------------------------------------------

void Supervisor::Attempt::onSignals() {
  signalfd_siginfo info;
  bool children = false;
  pid_t firstEnded = 0;
  while (::read(s_.signal_fd_, &info, sizeof info) == sizeof info) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      // Handled once below, whatever the number of SIGCHLDs merged. A pending SIGCHLD keeps the
      // sender of the first: the child that ended first of those merged into it.
      if (!children) firstEnded = static_cast<pid_t>(info.ssi_pid);
      children = true;
    } else if (sig == SIGUSR1 || sig == SIGUSR2) {
      for (auto& w : workers_) {
        if (w.running)
          processes_.signalProcess(w.pid,
                                   sig);  // the process only: its unprepared children would die
      }
    } else {
      onAgentSignal(sig);
    }
  }
  if (children) onChildren(firstEnded);
}

void Supervisor::Attempt::onAgentSignal(int sig) {
  report_.agent_signal = sig;
  s_.stop_requested_ = true;
  int forward = sig;
  if (sig == SIGINT) {
    const int count = ++s_.interrupts_;
    forward = count == 1 ? SIGINT : count == 2 ? SIGTERM : SIGKILL;
    say(interruptNote(count, plan_.term_timeout));
    if (count == 2) killAfterTheGrace();
  } else {
    killAfterTheGrace();
  }
  signalRunning(forward, false);
}

// SIGKILL to the workers still running --term_timeout from now, unless an earlier deadline runs.
void Supervisor::Attempt::killAfterTheGrace() {
  const auto deadline = now() + plan_.term_timeout;
  if (stopping_ && kill_deadline_ <= deadline) return;
  stopping_ = true;
  kill_deadline_ = deadline;
}

// Workers that ended are noted but stay unreaped; orphans adopted as subreaper are reaped.
// The worker that ended first (`firstEnded`, when it is one) is handled first: of two ranks that
// ended between two passes of the loop, the first to end is the culprit, not the lower rank.
void Supervisor::Attempt::onChildren(pid_t firstEnded) {
  auto first = std::find_if(workers_.begin(), workers_.end(),
                            [firstEnded](const Worker& w) { return w.pid == firstEnded; });
  if (first != workers_.end() && first->running) {
    if (auto ended = processes_.endedUnreaped(first->pid)) {
      onWorkerExit(*first, ended->exit_code, ended->signal);
    }
  }
  for (auto& w : workers_) {
    if (!w.running) continue;
    if (auto ended = processes_.endedUnreaped(w.pid))
      onWorkerExit(w, ended->exit_code, ended->signal);
  }
  for (pid_t pid : processes_.otherChildren()) {
    if (std::any_of(workers_.begin(), workers_.end(),
                    [pid](const Worker& w) { return w.pid == pid; }))
      continue;
    if (processes_.endedUnreaped(pid)) processes_.reap(pid);
  }
}

void Supervisor::Attempt::onWorkerExit(Worker& w, int exitCode, int signal) {
  w.running = false;
  w.outcome.exit_code = exitCode;
  w.outcome.signal = signal;
  w.outcome.ended_after_s = std::chrono::duration<double>(now() - start_).count();
  if (report_.agent_signal == SIGINT) giveTheRestTheGrace(w);
  if (exitCode == 0) {
    if (!first_clean_exit_) first_clean_exit_ = now();  // the exit guard's clock
    return;
  }
  if (!w.error_file.empty()) w.outcome.error_file_message = readErrorFile(w.error_file);
  if (report_.culprit || w.outcome.stopped_by_agent || report_.agent_signal != 0) return;
  report_.culprit = static_cast<size_t>(w.local_rank);
  stopTheOthers();
}

// Reads what the pipe has now (it is non-blocking until tearDown); EOF closes it.
void Supervisor::Attempt::onOutput(Worker& w, int stream) {
  while (true) {
    ssize_t n = ::read(w.fds[stream], buf_.data(), buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: more later
    const bool shown = (w.console_streams & (stream + 1)) != 0;
    if (n == 0) {  // EOF: the last writer (worker or descendant) closed it
      if (w.duplicating[stream]) duplicateLines(w, stream, {}, true);
      std::string rest = w.prefixers[stream].flush();
      if (shown) parts_.console.write(stream + 1, std::move(rest));
      ::epoll_ctl(s_.epoll_fd_, EPOLL_CTL_DEL, w.fds[stream], nullptr);
      ::close(w.fds[stream]);
      w.fds[stream] = -1;
      return;
    }
    if (w.log_fds[stream] >= 0) writeAll(w.log_fds[stream], buf_.data(), static_cast<size_t>(n));
    w.last_output = now();
    report_.printed = report_.printed || stream == 0;  // progress, for a job without heartbeats
    if (stream == 1) w.stderr_tail.feed(buf_.data(), static_cast<size_t>(n));
    if (w.duplicating[stream]) {
      duplicateLines(w, stream, std::string_view(buf_.data(), static_cast<size_t>(n)), false);
    }
    if (stream == 1 && w.outcome.stack_asked) keepStack(w, buf_.data(), static_cast<size_t>(n));
    std::string lines =
        w.prefixers[stream].feed(std::string_view(buf_.data(), static_cast<size_t>(n)));
    if (shown) parts_.console.write(stream + 1, std::move(lines));
  }
}

void Supervisor::Attempt::onLinkEvents() {
  for (auto& event : link_->takeEvents()) {
    switch (event.kind) {
      case LinkEvent::Kind::kPublishedFirst:
        report_.told_others = true;
        publication_ = Publication::kDone;
        break;
      case LinkEvent::Kind::kAnotherWasFirst:
        if (report_.culprit || event.failure.rank >= 0)
          report_.remote_culprit = std::move(event.failure);
        publication_ = Publication::kDone;
        break;
      case LinkEvent::Kind::kRemoteFailure:
        onRemoteFailure(std::move(event.failure));
        break;
      case LinkEvent::Kind::kGroupGrows:
        onGroupGrows(std::move(event.grows), event.excluded);
        break;
    }
  }
}

// A machine waits to join, or a straggler's machine is excluded: no failure, the group re-forms.
// The workers stop here as on every machine (collateral, never a culprit), and this machine
// publishes nothing.
void Supervisor::Attempt::onGroupGrows(std::string why, int excluded) {
  if (report_.remote_culprit || report_.told_others || report_.regrouped) return;
  report_.regrouped = std::move(why);
  report_.excluded_machine = excluded;
  publication_ = Publication::kDone;
  if (stopping_) return;  // already stopping for a reason of its own
  say(*report_.regrouped + "; stopping the workers here");
  report_.regrouped_said = true;
  stopTheOthers();
}

void Supervisor::Attempt::onRemoteFailure(JobFailure failure) {
  if (report_.remote_culprit || report_.told_others) return;
  // Stopped by a signal here too (scancel signals every node): this agent's own story stands.
  if (report_.agent_signal != 0 && failure.rank < 0) return;
  report_.remote_culprit = std::move(failure);
  if (stopping_) return;  // already stopping for a reason of its own
  say(describeFailure(*report_.remote_culprit) + "; stopping the workers here");
  stopTheOthers();
}

void Supervisor::Attempt::onConsoleReady() {
  parts_.console.ackReady();
  if (output_paused_ && !parts_.console.backlogged()) readOutput(true);
}

// ---- Actions ------------------------------------------------------------------------------

// After Ctrl-C a rank has ended, so the job cannot go on: the ranks still running (a worker may
// handle SIGINT, e.g. to save a checkpoint) get --term_timeout to finish, then SIGKILL, as
// torchrun kills what outlives its grace after a signal. A second Ctrl-C still sends SIGTERM.
void Supervisor::Attempt::giveTheRestTheGrace(const Worker& ended) {
  if (stopping_) return;
  const bool othersRun =
      std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
  if (!othersRun) return;
  stopping_ = true;
  kill_deadline_ = now() + plan_.term_timeout;
  grace_notice_ = GraceNotice{ended.local_rank, now() + kGraceNoticeSettle};
}

// The grace's notice, once the ranks that ended of the same Ctrl-C have been reaped: only when
// some still run (and have not been sent SIGKILL yet), naming them.
void Supervisor::Attempt::sayWhoGetsTheGrace() {
  if (!grace_notice_ || now() < grace_notice_->at) return;
  const int ended = grace_notice_->ended_local_rank;
  grace_notice_.reset();
  std::vector<int> running;
  for (const auto& w : workers_)
    if (w.running) running.push_back(w.local_rank);
  if (running.empty() || !stopping_) return;
  const bool one = running.size() == 1;
  say("local rank " + std::to_string(ended) + " ended after SIGINT; local " + ranksText(running) +
      (one ? " still runs: it gets " : " still run: they get ") + secondsText(plan_.term_timeout) +
      " from then (--term_timeout) to finish, then SIGKILL");
}

// The job failed (here or elsewhere): SIGTERM to every running worker, SIGKILL after the grace.
void Supervisor::Attempt::stopTheOthers() {
  culprit_end_ = now();
  signalRunning(SIGTERM, /*collateral=*/true);
  stopping_ = true;
  kill_deadline_ = now() + plan_.term_timeout;
}

// Signals the process group of every running worker (its leader unreaped: the group is ours).
void Supervisor::Attempt::signalRunning(int sig, bool collateral) {
  for (auto& w : workers_) {
    if (!w.running) continue;
    if (collateral) w.outcome.stopped_by_agent = true;
    processes_.signalGroup(w.pid, sig);
  }
}

void Supervisor::Attempt::killOverdue() {
  if (!stopping_ || now() < kill_deadline_) return;
  for (auto& w : workers_) {
    if (!w.running) continue;
    w.outcome.needed_sigkill = true;
    processes_.signalGroup(w.pid, SIGKILL);
  }
  stopping_ = false;  // SIGKILL cannot be refused; the exits follow
}

// The first failure here goes to the other machines once its stderr is read (without waiting:
// the job link's thread talks to the store).
void Supervisor::Attempt::publishFirstFailure() {
  if (!link_ || publication_ != Publication::kNone ||
      (!report_.culprit && report_.agent_signal == 0))
    return;
  publication_ = Publication::kDone;
  if (report_.remote_culprit) return;  // another machine was first; the others know
  if (!link_->publish(myFailure())) return;
  publication_ = Publication::kPending;
  publish_deadline_ = now() + plan_.round_timeouts.publish;
}

JobFailure Supervisor::Attempt::myFailure() {
  JobFailure mine;
  mine.machine_rank = placement_.machine_rank;
  mine.host = parts_.host;
  if (!report_.culprit) {
    mine.reason = "its agent received " + signalName(report_.agent_signal);
    mine.exit_code = 128 + report_.agent_signal;
    return mine;
  }
  Worker& w = workers_[*report_.culprit];
  if (w.fds[1] >= 0) onOutput(w, 1);
  mine.rank = w.rank;
  mine.local_rank = w.local_rank;
  mine.pid = w.pid;
  mine.exit_code = report_.hang ? kHungExitCode : w.outcome.exit_code;
  mine.signal = w.outcome.signal;
  mine.ended_after_s = w.outcome.ended_after_s;
  mine.stderr_tail = w.stderrTail();
  mine.error_file_message = w.outcome.error_file_message;
  return mine;
}

// torchrun's --duplicate_{stdout,stderr}_filters: one file per stream for the attempt, made (and
// emptied) even when no line will match, as torchrun does.
void Supervisor::Attempt::openFilteredLogs() {
  for (int stream = 0; stream < 2; ++stream) {
    if (plan_.duplicate_filters[stream].empty()) continue;
    const std::string path = filteredLog(parts_.run_dir, attempt_, stream + 1);
    if (auto made = config::makeDirectories(config::parentDirectory(path)); !made) {
      say(made.error());
      continue;
    }
    filtered_fds_[stream] = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (filtered_fds_[stream] < 0) say("cannot write " + path + ": " + std::strerror(errno));
  }
}

// Each complete line (and, at the end, the unfinished one) that contains a filter goes to the
// stream's file as "[<role><local rank>]:<line>".
void Supervisor::Attempt::duplicateLines(Worker& w, int stream, std::string_view data, bool atEnd) {
  std::string& partial = w.duplicate_partial[stream];
  partial.append(data.data(), data.size());
  std::string out;
  size_t start = 0;
  while (true) {
    size_t end = partial.find('\n', start);
    if (end == std::string::npos && !(atEnd && start < partial.size())) break;
    if (end == std::string::npos) end = partial.size();
    const std::string_view line(partial.data() + start, end - start);
    for (const auto& needle : plan_.duplicate_filters[stream]) {
      if (line.find(needle) == std::string_view::npos) continue;
      out += "[" + plan_.role + std::to_string(w.local_rank) + "]:" + std::string(line) + "\n";
      break;
    }
    start = end + 1;
  }
  partial.erase(0, std::min(start, partial.size()));
  if (!out.empty()) writeAll(filtered_fds_[stream], out.data(), out.size());
}

// Reads the workers' pipes, or, while the console is behind, leaves them be until it catches up
// (their writes block, as on a slow terminal); exits, signals and the job link are still served.
void Supervisor::Attempt::readOutput(bool on) {
  output_paused_ = !on;
  for (auto& w : workers_) {
    for (int stream = 0; stream < 2; ++stream) {
      if (w.fds[stream] >= 0) watchFd(s_.epoll_fd_, w.fds[stream], pipeId(w, stream), pipeEvents());
    }
  }
}

uint32_t Supervisor::Attempt::pipeEvents() const { return output_paused_ ? 0u : uint32_t{EPOLLIN}; }

// The workers' groups (their leaders unreaped until now, so the ids are still ours), then the
// leaders, then orphans re-parented to us that left those groups.
void Supervisor::Attempt::killLeftovers() {
  for (auto& w : workers_) {
    if (w.pid > 0) processes_.signalGroup(w.pid, SIGKILL);
  }
  for (auto& w : workers_) {
    if (w.pid <= 0) continue;
    processes_.reap(w.pid);
  }
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> children = processes_.otherChildren();
    if (children.empty()) break;
    for (pid_t pid : children) {
      ::kill(pid, SIGKILL);  // our unreaped child: the pid is still its
      processes_.reap(pid);
    }
  }
}

// ---- Tear-down and report -----------------------------------------------------------------

void Supervisor::Attempt::tearDown() {
  killLeftovers();
  // Everything that could write to the pipes is gone: read what is left, then close.
  for (auto& w : workers_) {
    for (int stream = 0; stream < 2; ++stream) {
      if (w.fds[stream] >= 0) {
        ::fcntl(w.fds[stream], F_SETFL, 0);
        onOutput(w, stream);
      }
      if (w.log_fds[stream] >= 0) ::close(w.log_fds[stream]);
    }
  }
  for (int& fd : filtered_fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  // SIGCHLDs of the leftovers were consumed by the reaping above; drop their queued signals.
  signalfd_siginfo info;
  while (::read(s_.signal_fd_, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo != SIGCHLD) {
      report_.agent_signal = static_cast<int>(info.ssi_signo);
      s_.stop_requested_ = true;
    }
  }
}

AttemptReport Supervisor::Attempt::finalReport() {
  settleHangReport();
  if (parts_.board) {
    for (const auto& [rank, entry] : parts_.board->snapshot()) {
      report_.max_step = std::max<int64_t>(report_.max_step, entry.step);
    }
  }
  report_.straggler_scores = stragglers_.latest();
  report_.stragglers = stragglers_.named();
  for (auto& w : workers_) {
    w.outcome.stderr_tail = w.stderrTail();
    report_.workers.push_back(w.outcome);
  }
  report_.duration_s = std::chrono::duration<double>(now() - start_).count();
  if (culprit_end_) {
    double last = 0;
    for (const auto& w : report_.workers) {
      if (w.stopped_by_agent) last = std::max(last, w.ended_after_s);
    }
    double culpritAt = std::chrono::duration<double>(*culprit_end_ - start_).count();
    if (last > 0) report_.stop_s = std::max(0.0, last - culpritAt);
  }
  const auto oomAfter = readOomKillCount();
  report_.oom_suspected = oom_before_ && oomAfter && *oomAfter > *oom_before_;
  return std::move(report_);
}

}  // namespace accel::launcher
