#include "launcher/supervise/rank_watch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "launcher/base/text.h"
#include "launcher/report/stack_frames.h"

namespace accel::launcher {
namespace {

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// "for 12 s": whole seconds, as people read them.
std::string forSeconds(SteadyClock::duration d) {
  return "for " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) +
         " s";
}

std::string ranksWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankRanges(ranks);
}

// Each rank's step, where every rank has one.
std::optional<std::map<int, int64_t>> stepsOfAll(const std::vector<RankProgress>& ranks) {
  std::map<int, int64_t> steps;
  for (const auto& r : ranks) {
    if (!r.step) return std::nullopt;
    steps[r.rank] = *r.step;
  }
  return steps;
}

// "rank 3 at step 1042 for 120 s; ranks 0–2, 4–7 at step 1043"
std::string stepsMessage(const std::map<int, int64_t>& steps, int64_t lowest,
                         SteadyClock::duration stale) {
  std::map<int64_t, std::vector<int>> byStep;
  for (const auto& [rank, step] : steps) byStep[step].push_back(rank);
  std::string text =
      ranksWord(byStep[lowest]) + " at step " + std::to_string(lowest) + " " + forSeconds(stale);
  for (const auto& [step, ranks] : byStep) {
    if (step != lowest) text += "; " + ranksWord(ranks) + " at step " + std::to_string(step);
  }
  return text;
}

// The rank of a stored key "<prefix><rank>", or -1 when `key` is not one.
long rankOfKey(const std::string& key, const std::string& prefix) {
  if (!startsWith(key, prefix)) return -1;
  char* end = nullptr;
  const long rank = std::strtol(key.c_str() + prefix.size(), &end, 10);
  if (end == key.c_str() + prefix.size() || *end != '\0') return -1;
  return rank;
}

}  // namespace

void ProgressBoard::onWrite(const std::string& storedKey, const std::string& value) {
  char* end = nullptr;
  const long long number = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') return;
  if (const long rank = rankOfKey(storedKey, storedWorkPrefix()); rank >= 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    work_[static_cast<int>(rank)] = number;
    return;
  }
  const long rank = rankOfKey(storedKey, storedHeartbeatPrefix());
  if (rank < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entries_[static_cast<int>(rank)];
  if (e.step != number || e.changed == SteadyClock::time_point{}) e.changed = SteadyClock::now();
  e.step = number;
  onStep(static_cast<int>(rank), number);
}

// A rank's step count moved: its work total now covers every step before it (the heartbeat sends
// the work first). Samples older than the newest one a window back are not needed any more.
void ProgressBoard::onStep(int rank, int64_t step) {
  auto work = work_.find(rank);
  if (work == work_.end()) return;  // a rank that reports no work
  auto& samples = samples_[rank];
  samples.push_back({step, work->second});
  size_t keep = 0;  // the newest sample at least a window before the last
  for (size_t i = 0; i < samples.size(); ++i) {
    if (step - samples[i].step >= window_) keep = i;
  }
  samples.erase(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(keep));
}

std::map<int, ProgressBoard::Entry> ProgressBoard::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

std::map<int, WorkWindow> ProgressBoard::workWindows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<int, WorkWindow> windows;
  for (const auto& [rank, samples] : samples_) {
    if (samples.size() < 2) continue;
    const WorkSample& first = samples.front();
    const WorkSample& last = samples.back();
    if (last.step - first.step < window_ || last.work_us <= first.work_us) continue;
    windows[rank] = {first.step, last.step, last.work_us - first.work_us};
  }
  return windows;
}

void ProgressBoard::keepWorkFor(int64_t steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  window_ = std::max<int64_t>(steps, 1);
}

void ProgressBoard::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  work_.clear();
  samples_.clear();
}

long clockTicksPerSecond() {
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? ticks : 100;
}

// A /proc stat line: "pid (comm) state ppid ... utime(14) stime(15) ... rss(24)"; comm may hold
// spaces and parentheses, so fields are counted after its last ')'.
std::optional<ProcSample> parseStat(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  ProcSample s;
  std::string field;
  fields >> s.state;
  uint64_t utime = 0, stime = 0;
  long long rssPages = 0;
  for (int index = 4; index <= 24 && fields >> field; ++index) {  // state was field 3
    if (index == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (index == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
    if (index == 24) rssPages = std::strtoll(field.c_str(), nullptr, 10);
  }
  s.cpu_ticks = utime + stime;
  s.rss_bytes = static_cast<uint64_t>(std::max<long long>(rssPages, 0)) *
                static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return s;
}

std::optional<ProcSample> readProcSample(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  auto process = parseStat(dir + "/stat");
  if (!process) return std::nullopt;
  // The main thread's own line (its task id is the pid); when it cannot be read (the process is
  // going away), the process's.
  const auto main = parseStat(dir + "/task/" + std::to_string(pid) + "/stat");
  process->main_thread_ticks = main ? main->cpu_ticks : process->cpu_ticks;
  process->main_thread_state = main ? main->state : process->state;
  return process;
}

std::optional<HangVerdict> judgeHang(const std::vector<RankProgress>& ranks,
                                     SteadyClock::time_point now,
                                     std::chrono::milliseconds timeout) {
  auto idle = [now](const RankProgress& r) { return now - r.moved; };
  std::vector<int> justified;
  for (const auto& r : ranks) {
    if (idle(r) < timeout) continue;
    const bool othersPastOrWaiting =
        std::all_of(ranks.begin(), ranks.end(), [&](const RankProgress& q) {
          if (q.rank == r.rank) return true;
          const bool past = q.step && r.step && *q.step > *r.step;
          return past || idle(q) >= timeout / 2;
        });
    if (othersPastOrWaiting) justified.push_back(r.rank);
  }
  if (justified.empty()) return std::nullopt;
  SteadyClock::duration stalest{0};
  for (const auto& r : ranks) {
    if (std::find(justified.begin(), justified.end(), r.rank) != justified.end())
      stalest = std::max(stalest, idle(r));
  }
  HangVerdict v;
  auto steps = stepsOfAll(ranks);
  if (steps) {
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
    for (const auto& [rank, step] : *steps)
      lowest = std::min(lowest, step), highest = std::max(highest, step);
    if (lowest != highest) {
      for (const auto& [rank, step] : *steps) {
        if (step == lowest) v.stuck.push_back(rank);
      }
      v.steps_differ = true;
      v.message = stepsMessage(*steps, lowest, stalest);
      return v;
    }
  }
  // Steps do not tell: every rank that stands still is a candidate, and the stacks will choose.
  for (const auto& r : ranks) {
    if (idle(r) >= timeout / 2) v.stuck.push_back(r.rank);
  }
  v.message = ranksWord(v.stuck) + " made no progress " + forSeconds(stalest) +
              (steps ? " (all at step " + std::to_string(steps->begin()->second) + ")"
                     : " (no heartbeats: neither output nor their main thread's CPU time moved)");
  return v;
}

namespace {

// The rank whose innermost frame is not the one all the others share, if exactly one is.
std::optional<int> oddStackOut(const std::vector<int>& candidates,
                               const std::map<int, std::string>& stacks) {
  std::map<std::string, std::vector<int>> byFrame;
  for (int rank : candidates) {
    auto it = stacks.find(rank);
    byFrame[it == stacks.end() ? "" : innermostFrame(it->second)].push_back(rank);
  }
  if (candidates.size() < 3 || byFrame.size() != 2) return std::nullopt;
  const auto first = byFrame.begin(), second = std::next(first);
  if (first->second.size() == 1 && !second->first.empty()) return first->second.front();
  if (second->second.size() == 1 && !first->first.empty()) return second->second.front();
  return std::nullopt;
}

// Ranks all waiting in collectives but at different places — a mismatch of collectives (one
// rank in DDP's forward sync, another in a barrier: uneven batches, a rank-dependent branch):
// "rank 0 at FRAME; ranks 1, 2 at FRAME", innermost frames; "" when they are all at one place.
std::string collectivePlaces(const std::vector<int>& candidates,
                             const std::map<int, std::string>& stacks) {
  std::map<std::string, std::vector<int>> byFrame;
  for (int rank : candidates) {
    auto it = stacks.find(rank);
    if (it != stacks.end()) byFrame[innermostFrame(it->second)].push_back(rank);
  }
  if (byFrame.size() < 2) return "";
  std::vector<std::pair<std::vector<int>, std::string>> places;
  for (auto& [frame, ranks] : byFrame) {
    const size_t start = frame.find_first_not_of(' ');
    places.emplace_back(ranks, start == std::string::npos ? frame : frame.substr(start));
  }
  std::sort(places.begin(), places.end());  // by their lowest rank
  std::string text;
  for (const auto& [ranks, frame] : places) {
    text += (text.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") +
            rankRanges(ranks) + " at " + frame;
  }
  return text;
}

}  // namespace

bool stackShowsCollective(const std::string& stack) {
  static const char* const kMarks[] = {"torch/distributed/",
                                       "c10d",
                                       "gloo",
                                       "nccl",
                                       "accel4comm",
                                       "accel::comm::",
                                       "ShmGroup",
                                       "GradientSync",
                                       "in all_reduce",
                                       "in barrier",
                                       "torch/autograd/",
                                       "torch/nn/parallel/distributed.py"};
  const std::string part = mainThreadPart(stack);
  return std::any_of(std::begin(kMarks), std::end(kMarks),
                     [&](const char* mark) { return part.find(mark) != std::string::npos; });
}

std::string innermostFrame(const std::string& stack) { return frameOfInterest(stack); }

// g++ 14 at -O2 warns of a memmove out of bounds when it copies a vector it knows holds at most
// one int (-Warray-bounds, -Wstringop-overflow: false positives of libstdc++'s vector copy, GCC
// bug 107138): not for this function.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
StackVerdict judgeByStacks(const std::vector<int>& candidates,
                           const std::map<int, std::string>& stacks) {
  if (candidates.size() <= 1) return {candidates, ""};
  std::vector<int> outside, waiting;  // without a stack: only a stack in a collective clears it
  for (int rank : candidates) {
    auto it = stacks.find(rank);
    (it == stacks.end() || !stackShowsCollective(it->second) ? outside : waiting).push_back(rank);
  }
  if (!outside.empty() && !waiting.empty()) {
    std::string why = std::string(outside.size() == 1 ? "rank " : "ranks ") + rankRanges(outside) +
                      " outside any collective, " + rankRanges(waiting) + " waiting in one";
    return {std::move(outside), std::move(why)};
  }
  if (auto odd = oddStackOut(candidates, stacks)) {
    std::vector<int> others, culprit;
    for (int rank : candidates) (rank == *odd ? culprit : others).push_back(rank);
    std::string why = "rank " + std::to_string(*odd) + " the only one elsewhere, " +
                      rankRanges(others) + " all at the same place";
    return {std::move(culprit), std::move(why)};
  }
  if (outside.empty()) {
    if (std::string places = collectivePlaces(candidates, stacks); !places.empty()) {
      return {{},
              "they do not tell which rank is stuck: all wait in collectives, but not the same "
              "one (" +
                  places + "): ranks calling different collectives, as with uneven batches"};
    }
  }
  return {{},
          "they do not tell which rank is stuck (" +
              std::string(outside.empty() ? "all in collectives" : "none in a collective") +
              ", and no one stack differs from all the others)"};
}
#pragma GCC diagnostic pop

std::string rankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return formatRuns(ranks, ", ", "\u2013", false);
}

}  // namespace accel::launcher
