#include "launcher/supervise/stragglers.h"

#include <algorithm>
#include <cstdio>

namespace accel::launcher {

std::vector<StragglerScore> scoreRanks(const std::map<int, WorkWindow>& windows,
                                       int ranksPerMachine) {
  std::vector<StragglerScore> scores;
  for (const auto& [rank, w] : windows) {
    StragglerScore s;
    s.rank = rank;
    s.machine = rank / std::max(ranksPerMachine, 1);
    s.work_s = static_cast<double>(w.work_us) / 1e6 / static_cast<double>(w.to_step - w.from_step);
    s.from_step = w.from_step;
    s.to_step = w.to_step;
    scores.push_back(s);
  }
  if (scores.size() < 2) return {};
  std::vector<double> work;
  for (const auto& s : scores) work.push_back(s.work_s);
  std::sort(work.begin(), work.end());
  const double median = work[(work.size() - 1) / 2];
  for (auto& s : scores) s.score = s.work_s > 0 ? std::min(1.0, median / s.work_s) : 1.0;
  return scores;
}

std::vector<StragglerWatch::Change> StragglerWatch::update(std::vector<StragglerScore> scores) {
  std::vector<Change> changes;
  for (const auto& s : scores) {
    const bool below = s.score < threshold_;
    const bool was = straggling_.count(s.rank) > 0;
    if (below == was) continue;
    changes.push_back({s, below});
    if (below) {
      straggling_.insert(s.rank);
      if (std::find(named_.begin(), named_.end(), s.rank) == named_.end()) named_.push_back(s.rank);
    } else {
      straggling_.erase(s.rank);
    }
  }
  if (!scores.empty()) latest_ = std::move(scores);
  return changes;
}

namespace {

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds < 0.01 ? "%.2f ms" : "%.0f ms", seconds * 1e3);
  return text;
}

}  // namespace

std::string scoreText(double score) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", score);
  return text;
}

std::string stragglerNotice(const StragglerWatch::Change& change, double threshold) {
  const StragglerScore& s = change.score;
  const double median = s.work_s * s.score;
  const std::string who =
      "rank " + std::to_string(s.rank) + " (machine " + std::to_string(s.machine) + ")";
  const std::string over =
      "over steps " + std::to_string(s.from_step) + "–" + std::to_string(s.to_step);
  if (!change.straggles) {
    return who + " keeps pace again: score " + scoreText(s.score) + " " + over;
  }
  return who + " straggles: its own work takes " + milliseconds(s.work_s) +
         " a step, the job's median " + milliseconds(median) + " (score " + scoreText(s.score) +
         " " + over + ", below --straggler_threshold " + scoreText(threshold) + ")";
}

}  // namespace accel::launcher
