#pragma once
// Stragglers: which rank slows the others, from the ranks' own timings.
//
// In synchronous training every rank steps at the slowest one's pace, so the step counters all
// agree while one machine drags the job. What differs is each rank's own work per step — the
// step's wall time less its waits in collectives (libaccel measures it; a Python worker reports
// it with one line, README "Stragglers"): a slow rank works longer and waits less. A rank's score
// is the job's median work per step over its own, at most 1 (nvidia-resiliency-ext's convention:
// 1 keeps pace, 0.3 works three times as long as the median rank). The median is the lower one
// (of two ranks, the faster), so that a job of two ranks can name the slow one.
//
// The agent that hosts the job's store sees every rank's heartbeat (ProgressBoard); every tick its
// supervisor scores the ranks over their last --straggler_window steps and says once when a rank
// falls below --straggler_threshold (and once when it is back above it).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/report/job_report.h"
#include "launcher/supervise/rank_watch.h"

namespace accel::launcher {

// The scores of the ranks with a window of work (WorkWindow), by rank; empty when fewer than two
// ranks can be scored (a median needs others). A rank's machine is rank / ranksPerMachine.
std::vector<StragglerScore> scoreRanks(const std::map<int, WorkWindow>& windows,
                                       int ranksPerMachine);

// What the agent says of the scores as they change; one per attempt.
class StragglerWatch {
 public:
  explicit StragglerWatch(double threshold) : threshold_(threshold) {}

  struct Change {
    StragglerScore score;
    bool straggles = true;  // fell below the threshold (else: back above it)
  };
  // The ranks that fell below the threshold since the last update, or came back above it.
  std::vector<Change> update(std::vector<StragglerScore> scores);
  const std::vector<StragglerScore>& latest() const { return latest_; }
  // Every rank named a straggler during the attempt, in the order named.
  const std::vector<int>& named() const { return named_; }
  // The ranks below the threshold now.
  const std::set<int>& straggling() const { return straggling_; }
  double threshold() const { return threshold_; }

 private:
  double threshold_;
  std::vector<StragglerScore> latest_;
  std::vector<int> named_;
  std::set<int> straggling_;
};

// A score as notices show it: "0.33".
std::string scoreText(double score);

// "rank 3 (machine 1) straggles: its own work takes 92 ms a step, the job's median 30 ms (score
// 0.33 over steps 40–61, below --straggler_threshold 0.70)".
std::string stragglerNotice(const StragglerWatch::Change& change, double threshold);

}  // namespace accel::launcher
