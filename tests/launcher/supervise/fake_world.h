#pragma once
// FakeWorld: Processes and Clock (launcher/supervise/processes.h) for the supervisor's unit
// tests, as ninja's FakeCommandRunner is for its Builder. Workers are scripts in fake time (when
// they exit by themselves, with which code, what they write to stderr, which signals they
// survive and how long they take to die of the others); time moves only when the supervisor
// waits, straight to the next thing that happens, so escalation timings are exact and a test
// of a 5 s grace period takes microseconds. Exits reach the supervisor as they do for real: the
// fake sends this process a SIGCHLD (blocked by the supervisor, read from its signalfd); a
// signal "sent to the agent" is a real kill(getpid(), sig) at its fake time. Everything the
// supervisor does to the world is logged with its fake time, in order.

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "launcher/base/posix.h"
#include "launcher/plan/worker_env.h"
#include "launcher/supervise/processes.h"
#include "launcher/supervise/rank_watch.h"

namespace accel::launcher::testing {

using std::chrono::milliseconds;

class FakeWorld : public Processes, public Clock {
 public:
  // What one worker does, in fake time from its spawn: Script().exits(100, 3).writes("...").
  struct Script {
    std::optional<milliseconds> exit_after;  // it exits by itself then, with exit_code
    int exit_code = 0;
    std::string stderr_text;                 // written to its stderr as it starts
    std::string stdout_text;                 // written to its stdout as it starts
    std::set<int> surviving;                 // signals it catches and lives on (never SIGKILL)
    milliseconds dies_after{0};              // how long it takes to die of another signal
    std::optional<std::string> spawn_error;  // it cannot be started at all
    int64_t heartbeat_step = 0;              // the step it reports as it starts (0: none)

    Script& exits(int64_t afterMs, int code = 0) {
      exit_after = milliseconds(afterMs);
      exit_code = code;
      return *this;
    }
    Script& writes(std::string text) {
      stderr_text = std::move(text);
      return *this;
    }
    Script& says(std::string text) {
      stdout_text = std::move(text);
      return *this;
    }
    Script& survives(int sig) {
      surviving.insert(sig);
      return *this;
    }
    Script& diesAfter(int64_t ms) {
      dies_after = milliseconds(ms);
      return *this;
    }
    Script& reachesStep(int64_t step) {
      heartbeat_step = step;
      return *this;
    }
    Script& cannotStart(std::string error) {
      spawn_error = std::move(error);
      return *this;
    }
  };

  // One thing the supervisor did, at fake milliseconds since the world began.
  struct Action {
    int64_t at_ms;
    std::string what;  // "spawn rank 1 attempt 0", "signal group rank 1 SIGTERM", "reap rank 1"
    bool operator==(const Action& o) const { return at_ms == o.at_ms && what == o.what; }
    friend std::ostream& operator<<(std::ostream& out, const Action& a) {
      return out << "{" << a.at_ms << ", \"" << a.what << "\"}";
    }
  };

  FakeWorld() : epoch_(std::chrono::steady_clock::now()), now_(epoch_) {}

  // The script of the worker whose RANK (global) is `rank` in attempt `attempt`.
  void script(int rank, Script s, int attempt = 0) { scripts_[{attempt, rank}] = std::move(s); }
  // Heartbeats go to `board` (the one the supervisor reads), as the job's store would write them.
  void useBoard(ProgressBoard* board) { board_ = board; }
  // The agent receives `sig` at `atMs`.
  void signalAgentAt(int64_t atMs, int sig) { agent_signals_.push_back({atMs, sig}); }

  const std::vector<Action>& actions() const { return actions_; }
  // The actions whose text starts with `prefix`.
  std::vector<Action> actionsStarting(const std::string& prefix) const {
    std::vector<Action> out;
    for (const auto& a : actions_) {
      if (a.what.rfind(prefix, 0) == 0) out.push_back(a);
    }
    return out;
  }
  // The environment a spawned worker got (by spawn order).
  const std::vector<std::vector<std::string>>& spawnedEnvs() const { return envs_; }
  int64_t nowMs() const { return ms(now_); }

  // ---- Processes ----
  Expected<pid_t> spawn(const SpawnSpec& spec) override {
    const int rank = std::stoi(envValue(spec.env, "RANK"));
    const int attempt = std::stoi(envValue(spec.env, "TORCHELASTIC_RESTART_COUNT"));
    log("spawn rank " + std::to_string(rank) + " attempt " + std::to_string(attempt));
    envs_.push_back(spec.env);
    const Script s = scripts_.count({attempt, rank}) ? scripts_[{attempt, rank}] : Script{};
    if (s.spawn_error) return makeError(*s.spawn_error);
    const pid_t pid = next_pid_++;
    Worker& w = workers_[pid];
    w.rank = rank;
    w.script = s;
    w.stderr_fd = ::dup(spec.stderr_fd);  // the worker's end: open while it "runs"
    if (!s.stderr_text.empty()) writeAll(w.stderr_fd, s.stderr_text.data(), s.stderr_text.size());
    if (!s.stdout_text.empty())
      writeAll(spec.stdout_fd, s.stdout_text.data(), s.stdout_text.size());
    if (s.heartbeat_step > 0 && board_) {
      board_->onWrite(storedHeartbeatPrefix() + std::to_string(rank),
                      std::to_string(s.heartbeat_step));
    }
    if (s.exit_after) endAt(w, now_ + *s.exit_after, s.exit_code, 0);
    return pid;
  }

  std::optional<Reaped> endedUnreaped(pid_t pid) override {
    const Worker& w = workers_.at(pid);
    if (!w.ended) return std::nullopt;
    return Reaped{pid, w.exit_code, w.signal};
  }

  void reap(pid_t pid) override {
    Worker& w = workers_.at(pid);
    if (!w.ended) end(w, 128 + SIGKILL, SIGKILL);  // reaping waits for the end: never here
    w.reaped = true;
    log("reap rank " + std::to_string(w.rank));
  }

  void signalGroup(pid_t leader, int sig) override { deliver(leader, sig, "signal group"); }
  void signalProcess(pid_t pid, int sig) override { deliver(pid, sig, "signal process"); }

  std::vector<pid_t> otherChildren() override {
    std::vector<pid_t> out;
    for (const auto& [pid, w] : workers_) {
      if (!w.reaped) out.push_back(pid);
    }
    return out;
  }

  std::optional<ProcSample> sample(pid_t) override { return std::nullopt; }

  // ---- Clock ----
  time_point now() const override { return now_; }

  // Events already there are returned at once; else time jumps to the next scripted end or
  // agent signal (which makes one), or to the deadline.
  int wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) override {
    int n = ::epoll_wait(epollFd, events, maxEvents, 0);
    if (n != 0) return n;
    if (now_ - epoch_ > std::chrono::hours(1)) {  // a test whose workers never end
      std::fprintf(stderr, "FakeWorld: an hour of fake time passed; a worker has no end\n");
      std::abort();
    }
    const std::optional<time_point> next = nextHappening();
    if (!next || *next > deadline) {
      now_ = std::max(now_, deadline);
      return 0;
    }
    now_ = std::max(now_, *next);
    happen();
    return ::epoll_wait(epollFd, events, maxEvents, 0);
  }

  // The world's happenings up to `deadline` take place, then the time is `deadline`.
  void sleepUntil(time_point deadline) override {
    for (std::optional<time_point> next = nextHappening(); next && *next <= deadline;
         next = nextHappening()) {
      now_ = std::max(now_, *next);
      happen();
    }
    now_ = std::max(now_, deadline);
  }

 private:
  struct Worker {
    int rank = 0;
    Script script;
    int stderr_fd = -1;
    std::optional<time_point> end_at;
    int end_code = 0, end_signal = 0;
    bool ended = false, reaped = false;
    int exit_code = 0, signal = 0;
  };

  static std::string envValue(const std::vector<std::string>& env, const std::string& key) {
    for (const auto& kv : env) {
      if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    }
    return "0";
  }

  int64_t ms(time_point t) const {
    return std::chrono::duration_cast<milliseconds>(t - epoch_).count();
  }
  void log(const std::string& what) { actions_.push_back({ms(now_), what}); }

  void deliver(pid_t pid, int sig, const std::string& how) {
    Worker& w = workers_.at(pid);
    // The tear-down signals every group, ended or not: those to ended workers say so.
    log(how + " rank " + std::to_string(w.rank) + " " + signalName(sig) +
        (w.ended ? " (ended)" : ""));
    if (w.ended) return;
    if (sig == SIGKILL) return end(w, 128 + SIGKILL, SIGKILL);
    if (sig == SIGUSR1 || sig == SIGUSR2 || w.script.surviving.count(sig)) return;
    endAt(w, now_ + w.script.dies_after, 128 + sig, sig);
  }

  void endAt(Worker& w, time_point at, int code, int sig) {
    if (w.end_at && *w.end_at <= at) return;  // an earlier end stands
    w.end_at = at;
    w.end_code = code;
    w.end_signal = sig;
    if (at <= now_) happen();
  }

  void end(Worker& w, int code, int sig) {
    w.ended = true;
    w.end_at.reset();
    w.exit_code = code;
    w.signal = sig;
    if (w.stderr_fd >= 0) ::close(w.stderr_fd);
    w.stderr_fd = -1;
    ::kill(::getpid(), SIGCHLD);  // as the kernel would: the supervisor reads it from its signalfd
  }

  std::optional<time_point> nextHappening() const {
    std::optional<time_point> next;
    for (const auto& [pid, w] : workers_) {
      if (!w.ended && w.end_at && (!next || *w.end_at < *next)) next = w.end_at;
    }
    for (const auto& [at, sig] : agent_signals_) {
      const time_point t = epoch_ + milliseconds(at);
      if (!next || t < *next) next = t;
    }
    return next;
  }

  // Everything due by now happens: scripted ends, then signals to the agent.
  void happen() {
    for (auto& [pid, w] : workers_) {
      if (!w.ended && w.end_at && *w.end_at <= now_) end(w, w.end_code, w.end_signal);
    }
    for (auto it = agent_signals_.begin(); it != agent_signals_.end();) {
      if (epoch_ + milliseconds(it->first) > now_) {
        ++it;
        continue;
      }
      log("agent receives " + signalName(it->second));
      ::kill(::getpid(), it->second);
      it = agent_signals_.erase(it);
    }
  }

  ProgressBoard* board_ = nullptr;
  time_point epoch_;
  time_point now_;
  pid_t next_pid_ = 1000;  // never a real process: nothing real is ever signalled
  std::map<std::pair<int, int>, Script> scripts_;  // (attempt, rank) → script
  std::map<pid_t, Worker> workers_;
  std::vector<std::pair<int64_t, int>> agent_signals_;
  std::vector<Action> actions_;
  std::vector<std::vector<std::string>> envs_;
};

}  // namespace accel::launcher::testing
