#include "launcher/report/job_report.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <sstream>

#include "launcher/base/posix.h"
#include "launcher/base/text.h"
#include "launcher/report/stack_frames.h"

namespace accel::launcher {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string endText(int exitCode, int signal) {
  if (signal != 0)
    return "signal " + signalName(signal) + " (exit code " + std::to_string(exitCode) + ")";
  return "exit code " + std::to_string(exitCode);
}

void printEvidence(std::ostringstream& out, const std::string& errorFileMessage,
                   const std::vector<std::string>& tail) {
  if (!errorFileMessage.empty()) out << "  error file: " << errorFileMessage << "\n";
  if (tail.empty()) {
    out << "  (its stderr was empty)\n";
  } else {
    out << "  last " << tail.size() << " line(s) of its stderr:\n";
    for (const auto& line : tail) out << "    | " << line << "\n";
  }
}

std::string machineText(const JobFailure& f) {
  return "machine " + std::to_string(f.machine_rank) + (f.host.empty() ? "" : " (" + f.host + ")");
}

// The stacks the agent collected: the stuck ranks' whole, one line for each of the others (all
// of them are in summary.json).
void printStacks(std::ostringstream& out, const AttemptReport& a) {
  const auto& stuck = a.hang->stuck_ranks;
  bool noNames = false;  // a native frame without its symbol: say how to get names, once
  for (const auto& w : a.workers) {
    if (!w.stack_asked) continue;
    const bool isStuck = std::find(stuck.begin(), stuck.end(), w.rank) != stuck.end();
    if (w.stack.empty()) {
      out << "  rank " << w.rank
          << ": no stack (it printed nothing after SIGABRT: not Python with faulthandler, nor "
             "libaccel)\n";
      continue;
    }
    std::istringstream lines(w.stack);
    std::string line;
    if (frameWithoutSymbol(frameOfInterest(w.stack))) noNames = true;
    if (!isStuck) {
      const std::string innermost = frameOfInterest(w.stack);
      out << "  rank " << w.rank
          << " was in: " << (innermost.empty() ? "(see summary.json)" : innermost) << "\n";
      continue;
    }
    out << "  stack of rank " << w.rank << " (pid " << w.pid << "):\n";
    for (int n = 0; std::getline(lines, line) && n < 80; ++n) {
      if (line.rfind("Extension modules:", 0) == 0)
        continue;  // faulthandler's list of loaded modules
      out << "    | " << demangleStack(line) << "\n";
    }
  }
  if (noNames) out << "  (" << kSymbolNamesHint << ")\n";
}

}  // namespace

std::string describeEnd(const WorkerOutcome& w) { return endText(w.exit_code, w.signal); }

std::string describeFailure(const JobFailure& f) {
  if (f.machine_rank < 0) return f.reason;  // the group's, not one machine's (a machine joins)
  if (f.rank < 0) return machineText(f) + ": " + f.reason;
  return "rank " + std::to_string(f.rank) + " on " + machineText(f) + " failed with " +
         endText(f.exit_code, f.signal);
}

std::string describeLocalFailure(const JobFailure& f) {
  if (f.rank < 0) return f.reason;
  return "rank " + std::to_string(f.rank) + ": " + endText(f.exit_code, f.signal);
}

nlohmann::json failureToJson(const JobFailure& f) {
  return {{"machine_rank", f.machine_rank},
          {"host", f.host},
          {"rank", f.rank},
          {"local_rank", f.local_rank},
          {"pid", f.pid},
          {"exit_code", f.exit_code},
          {"signal", f.signal},
          {"reason", f.reason},
          {"cause", f.cause},
          {"hung", f.hung},
          {"ended_after_s", f.ended_after_s},
          {"stderr_tail", f.stderr_tail},
          {"error_file_message", f.error_file_message}};
}

JobFailure failureFromJson(const nlohmann::json& j) {
  JobFailure f;
  f.machine_rank = j.at("machine_rank").get<int>();
  f.host = j.at("host").get<std::string>();
  f.rank = j.at("rank").get<int>();
  f.local_rank = j.at("local_rank").get<int>();
  f.pid = j.at("pid").get<long>();
  f.exit_code = j.at("exit_code").get<int>();
  f.signal = j.at("signal").get<int>();
  f.reason = j.at("reason").get<std::string>();
  f.cause = j.value("cause", "");
  f.hung = j.value("hung", false);
  f.ended_after_s = j.at("ended_after_s").get<double>();
  f.stderr_tail = j.at("stderr_tail").get<std::vector<std::string>>();
  f.error_file_message = j.at("error_file_message").get<std::string>();
  return f;
}

namespace {

// One line per attempt: how it ended.
void printAttempts(std::ostringstream& out, const JobReport& report) {
  for (const auto& a : report.attempts) {
    out << "attempt " << a.attempt << " (" << seconds(a.duration_s) << "): ";
    if (a.job_failure && !a.hang) {
      out << describeFailure(*a.job_failure) << "\n";
    } else if (a.remote_culprit) {
      out << describeFailure(*a.remote_culprit) << "\n";
    } else if (a.hang) {
      out << (a.hang->kind == "exit" ? "did not exit" : "hung") << " ("
          << ranksText(a.hang->stuck_ranks) << ")\n";
    } else if (a.regrouped) {
      out << "stopped for the group to re-form: " << *a.regrouped << "\n";
    } else if (!a.culprit) {
      out << (a.agent_signal ? "stopped by " + signalName(a.agent_signal) + " sent to the agent"
                             : "succeeded")
          << "\n";
    } else {
      const auto& w = a.workers[*a.culprit];
      out << "rank " << w.rank << " failed with " << describeEnd(w) << "\n";
    }
  }
}

// The job's first failure, when it happened on another machine.
void printRemoteCulprit(std::ostringstream& out, const AttemptReport& last) {
  const JobFailure& f = *last.remote_culprit;
  if (f.rank >= 0) {
    out << "culprit: rank " << f.rank << " on " << machineText(f) << ", local rank " << f.local_rank
        << ", pid " << f.pid << " — first to fail in the job, " << endText(f.exit_code, f.signal)
        << ", after " << seconds(f.ended_after_s) << "\n";
    printEvidence(out, f.error_file_message, f.stderr_tail);
  } else {
    out << "culprit: " << describeFailure(f) << "\n";
  }
  if (last.culprit) {
    const WorkerOutcome& w = last.workers[*last.culprit];
    out << "also failed on this machine, after it: rank " << w.rank << " with " << describeEnd(w)
        << "\n";
  }
}

void printCulprit(std::ostringstream& out, const AttemptReport& last) {
  const WorkerOutcome& w = last.workers[*last.culprit];
  out << "culprit: rank " << w.rank << " (local rank " << w.local_rank << ", pid " << w.pid
      << ") — ";
  if (last.hang) {
    out << (last.hang->kind == "exit" ? "still running" : "stuck")
        << ", stopped by the agent after " << seconds(w.ended_after_s) << " (" << describeEnd(w)
        << ")\n";
  } else {
    out << "first to fail" << (last.told_others ? " in the job" : "") << ", " << describeEnd(w)
        << ", after " << seconds(w.ended_after_s) << "\n";
  }
  if (last.oom_suspected) {
    out << "  likely killed by the OOM killer: this cgroup's oom_kill count rose during the run\n";
  }
  if (!last.hang || !w.stderr_tail.empty() || !w.error_file_message.empty()) {
    printEvidence(out, w.error_file_message, w.stderr_tail);
  }
  if (last.told_others) out << "the agents of the other machines were told to stop their workers\n";
}

// The other workers: stopped by the agent, failed on their own (exited with a code of their own,
// not of the agent's signal: the same import error, their own traceback about the culprit's
// closed connection), killed after the grace period, or finished before. A shell's 128+N for a
// child the signal ended counts as the signal.
void printTheOthers(std::ostringstream& out, const AttemptReport& last) {
  std::vector<int> collateral, killed, clean;
  std::map<int, std::vector<int>> failedByCode;  // exit code → ranks
  for (size_t i = 0; i < last.workers.size(); ++i) {
    const auto& w = last.workers[i];
    if (last.culprit && i == *last.culprit) continue;
    if (w.needed_sigkill) killed.push_back(w.rank);
    // 129–159 from a rank being stopped: a shell's code for its child's death by a signal.
    const bool bySignal =
        w.signal != 0 || (w.stopped_by_agent && w.exit_code > 128 && w.exit_code < 160);
    if (!bySignal && w.exit_code != 0) {
      failedByCode[w.exit_code].push_back(w.rank);
    } else if (w.stopped_by_agent) {
      collateral.push_back(w.rank);
    } else if (w.exit_code == 0) {
      clean.push_back(w.rank);
    }
  }
  for (const auto& [code, ranks] : failedByCode)
    out << "also failed on their own: " << ranksText(ranks) << " (exit code " << code << ")\n";
  if (!collateral.empty()) {
    out << "stopped by the agent (collateral): " << ranksText(collateral);
    if (last.stop_s) out << " in " << seconds(*last.stop_s);
    if (!killed.empty()) out << "; SIGKILL needed for " << ranksText(killed);
    out << "\n";
  } else if (!killed.empty()) {  // stopped by a signal to the agent
    out << "SIGKILL needed for " << ranksText(killed) << " (alive after --term_timeout)\n";
  }
  if (!clean.empty()) out << "finished before the failure: " << ranksText(clean) << "\n";
}

// The banner: what ended the job, centred in a line of 68.
std::string banner(const AttemptReport& last) {
  std::string title = "accel: job failed";
  if (last.agent_signal == SIGINT && !last.culprit && !last.remote_culprit && !last.hang)
    title = "accel: job interrupted (Ctrl-C)";
  else if (last.agent_signal && !last.culprit && !last.remote_culprit && !last.hang)
    title = "accel: job stopped (" + signalName(last.agent_signal) + ")";
  const size_t width = 68, pad = width > title.size() + 2 ? (width - title.size() - 2) / 2 : 0;
  std::string line = std::string(pad, '=') + " " + title + " ";
  return line + std::string(width > line.size() ? width - line.size() : 0, '=');
}

}  // namespace

std::string renderFailureSummary(const JobReport& report, const std::string& logDir) {
  return renderSummaryBody(report, logDir) + renderSummaryEnd(report);
}

std::string renderSummaryBody(const JobReport& report, const std::string& logDir) {
  if (report.attempts.empty() || report.attempts.back().succeeded()) return "";
  std::ostringstream out;
  out << "\n" << banner(report.attempts.back()) << "\n";
  printAttempts(out, report);
  const AttemptReport& last = report.attempts.back();
  if (last.hang) {
    out << (last.hang->kind == "exit" ? "the job did not exit: " : "the job hung: ")
        << last.hang->message << "\n";
    out << "stacks (the agent sent SIGABRT to every rank still running):\n";
    printStacks(out, last);
  }
  if (last.agent_signal) {
    out << "The agent received " << signalName(last.agent_signal)
        << " and forwarded it to the workers.\n";
  }
  if (last.remote_culprit) {
    printRemoteCulprit(out, last);
  } else if (last.culprit) {
    printCulprit(out, last);
  }
  printTheOthers(out, last);
  if (report.restarts_used > 0) out << "restarts used: " << report.restarts_used << "\n";
  for (const auto& hint : report.hints) out << "hint: " << hint << "\n";
  out << (logDir.empty() ? "no logs kept (--log_dir DIR keeps each rank's output and summary.json)"
                         : "logs: " + logDir + " (each rank's output, summary.json)")
      << "\n";
  return out.str();
}

std::string renderSummaryEnd(const JobReport& report, const std::string& command) {
  if (report.attempts.empty() || report.attempts.back().succeeded()) return "";
  return command + " exits with " + std::to_string(report.exit_code) +
         "\n====================================================================\n";
}

std::string colourSummary(const std::string& summary) {
  std::string out;
  size_t at = 0;
  while (at < summary.size()) {
    size_t end = summary.find('\n', at);
    if (end == std::string::npos) end = summary.size();
    const std::string line = summary.substr(at, end - at);
    const char* colour = line.rfind("====", 0) == 0       ? "\033[1;31m"
                         : line.rfind("culprit:", 0) == 0 ? "\033[31m"
                         : line.rfind("hint:", 0) == 0    ? "\033[36m"
                                                          : nullptr;
    out += colour && !line.empty() ? colour + line + "\033[0m" : line;
    if (end < summary.size()) out += '\n';
    at = end + 1;
  }
  return out;
}

nlohmann::json healthJson(const std::vector<HealthRecord>& checks) {
  nlohmann::json health = nlohmann::json::array();
  for (const auto& c : checks) {
    health.push_back(
        {{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}, {"took_ms", c.took_ms}});
  }
  return health;
}

nlohmann::json stragglerScoresJson(const std::vector<StragglerScore>& scores) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : scores) {
    out.push_back({{"rank", s.rank},
                   {"machine", s.machine},
                   {"work_s", s.work_s},
                   {"score", s.score},
                   {"from_step", s.from_step},
                   {"to_step", s.to_step}});
  }
  return out;
}

nlohmann::json renderReportJson(const JobReport& report) {
  const nlohmann::json health = healthJson(report.health_checks);
  nlohmann::json attempts = nlohmann::json::array();
  for (const auto& a : report.attempts) {
    nlohmann::json workers = nlohmann::json::array();
    for (const auto& w : a.workers) {
      workers.push_back(
          {{"rank", w.rank},
           {"local_rank", w.local_rank},
           {"pid", w.pid},
           {"exit_code", w.exit_code},
           {"signal", w.signal ? nlohmann::json(signalName(w.signal)) : nlohmann::json(nullptr)},
           {"stopped_by_agent", w.stopped_by_agent},
           {"needed_sigkill", w.needed_sigkill},
           {"ended_after_s", w.ended_after_s},
           {"stderr_tail", w.stderr_tail},
           {"stack", w.stack_asked ? nlohmann::json(w.stack) : nlohmann::json(nullptr)}});
    }
    nlohmann::json entry = {
        {"attempt", a.attempt},
        {"succeeded", a.succeeded()},
        {"duration_s", a.duration_s},
        {"oom_suspected", a.oom_suspected},
        {"agent_signal",
         a.agent_signal ? nlohmann::json(signalName(a.agent_signal)) : nlohmann::json(nullptr)},
        {"stop_s", a.stop_s ? nlohmann::json(*a.stop_s) : nlohmann::json(nullptr)},
        {"workers", workers}};
    if (a.culprit) {
      const auto& w = a.workers[*a.culprit];
      entry["culprit"] = {
          {"rank", w.rank},
          {"local_rank", w.local_rank},
          {"exit_code", w.exit_code},
          {"signal", w.signal ? nlohmann::json(signalName(w.signal)) : nlohmann::json(nullptr)},
          {"error_file_message", w.error_file_message}};
    } else {
      entry["culprit"] = nullptr;
    }
    entry["hang"] = a.hang ? nlohmann::json{{"kind", a.hang->kind},
                                            {"message", a.hang->message},
                                            {"stuck_ranks", a.hang->stuck_ranks},
                                            {"timeout_s", a.hang->timeout_s},
                                            {"detected_at", a.hang->detected_at}}
                           : nlohmann::json(nullptr);
    entry["remote_culprit"] =
        a.remote_culprit ? failureToJson(*a.remote_culprit) : nlohmann::json(nullptr);
    entry["job_failure"] = a.job_failure ? failureToJson(*a.job_failure) : nlohmann::json(nullptr);
    entry["regrouped"] = a.regrouped ? nlohmann::json(*a.regrouped) : nlohmann::json(nullptr);
    entry["straggler_scores"] = stragglerScoresJson(a.straggler_scores);
    entry["stragglers"] = a.stragglers;
    attempts.push_back(entry);
  }
  return {{"exit_code", report.exit_code},
          {"succeeded", report.exit_code == 0},
          {"restarts_used", report.restarts_used},
          {"health_checks", health},
          {"attempts", attempts}};
}

int jobExitCode(const AttemptReport& last) {
  if (last.hang) return kHungExitCode;
  if (last.remote_culprit) return last.remote_culprit->exit_code;
  if (last.culprit) return last.workers[*last.culprit].exit_code;
  if (last.agent_signal) return 128 + last.agent_signal;
  if (last.regrouped) return 1;  // the group did not re-form: the job did not finish
  return 0;
}

namespace {

// The last line of a stderr tail that says something.
std::string lastLine(const std::vector<std::string>& tail) {
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (it->find_first_not_of(" \t") != std::string::npos) return *it;
  }
  return "";
}

}  // namespace

std::optional<JobFailure> failureOf(const AttemptReport& a, int machineRank,
                                    const std::string& host) {
  if (a.succeeded()) return std::nullopt;
  JobFailure f;
  f.machine_rank = machineRank;
  f.host = host;
  if (!a.culprit) {
    f.reason = "its agent received " + signalName(a.agent_signal);
    f.exit_code = 128 + a.agent_signal;
    return f;
  }
  const WorkerOutcome& w = a.workers[*a.culprit];
  f.rank = w.rank;
  f.local_rank = w.local_rank;
  f.pid = w.pid;
  f.hung = a.hang.has_value();
  f.exit_code = f.hung ? kHungExitCode : w.exit_code;
  f.signal = w.signal;
  f.ended_after_s = w.ended_after_s;
  f.stderr_tail = w.stderr_tail;
  f.error_file_message = w.error_file_message;
  return f;
}

std::optional<std::string> repeatedFailure(int previousAttempt, const JobFailure& previous,
                                           bool previousProgress, int lastAttempt,
                                           const JobFailure& last, bool lastProgress,
                                           bool heartbeats, const std::string& describedLast) {
  if (previousProgress || lastProgress || previous.rank < 0 || last.rank < 0 || previous.hung ||
      last.hung || previous.exit_code != last.exit_code || previous.signal != last.signal) {
    return std::nullopt;
  }
  const std::string line = lastLine(last.stderr_tail);
  if (line != lastLine(previous.stderr_tail)) return std::nullopt;
  const std::string before =
      previous.rank == last.rank ? "" : ", as rank " + std::to_string(previous.rank) + " did";
  const std::string when = heartbeats ? "before any rank completed a step"
                                      : "before any rank wrote to stdout (no heartbeats: the "
                                        "agent sees no steps)";
  return "attempts " + std::to_string(previousAttempt) + " and " + std::to_string(lastAttempt) +
         " failed the same way " + when + " (" + describedLast + before +
         (line.empty() ? std::string() : "; last stderr line: " + line) + ")";
}

bool culpritSaid(const JobReport& report, const std::string& text) {
  if (report.attempts.empty() || !report.attempts.back().culprit) return false;
  const AttemptReport& last = report.attempts.back();
  const auto& tail = last.workers.at(*last.culprit).stderr_tail;
  return std::any_of(tail.begin(), tail.end(), [&text](const std::string& line) {
    return line.find(text) != std::string::npos;
  });
}

std::optional<std::string> missingRankHint(const JobReport& report, bool withoutRank) {
  if (!withoutRank || !culpritSaid(report, "environment variable RANK expected, but not set"))
    return std::nullopt;
  return "one process gets no RANK or WORLD_SIZE (as under accelerate launch), so "
         "init_process_group has no group to join: run several with --num_processes 2 (-n 2), "
         "or write a config with `accel config`";
}

std::optional<std::string> noLibuvHint(const JobReport& report) {
  if (!culpritSaid(report, "use_libuv was requested but PyTorch was build without libuv support"))
    return std::nullopt;
  return "this torch was built without libuv (Debian's python3-torch 2.x), and its env:// "
         "rendezvous under an agent's store (accel's or torchrun's) asks for it: use a torch "
         "with libuv (pip's), or make it create the TCPStore with use_libuv=False before "
         "init_process_group: sys.modules[\"torch.distributed.rendezvous\"].TCPStore = "
         "functools.partial(torch.distributed.TCPStore, use_libuv=False)";
}

}  // namespace accel::launcher
