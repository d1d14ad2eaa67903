#pragma once
// RoundStop: what stopped a round, as the round's stop record (RoundKeys::stop) holds it. One
// record per round, first come first served (a compare-and-set), so that exactly one thing stops
// a round on every machine alike. It is one of two things:
//   - a failure (JobFailure): a worker's end, an agent told to stop, or a member lost (cause
//     kCauseLost) — the round failed, and the restart rule decides whether a restart is spent;
//   - the group re-forming: no failure; a machine waits to join while the group has room, and the
//     group re-forms to take it without counting a restart (`grows`: why, for the notices); or
//     the agent that scores the ranks excludes a straggler's machine (`excluded`), and the group
//     re-forms without it, uncounted, when MIN allows (--straggler_action exclude).
// Liveness (round/liveness.h) and the links (c10d/job_link.h, etcd/link.h) make them; the
// supervisor hears them as LinkEvents; RoundCloser reads the record when the round ends.

#include <optional>
#include <string>

#include "launcher/rendezvous/round/rules.h"
#include "launcher/report/job_report.h"

namespace accel::launcher {

struct RoundStop {
  std::optional<JobFailure> failure;  // set: the round failed
  std::string grows;                  // no failure: why the group re-forms
  int excluded = -1;                  // no failure: the machine the group re-forms without

  static RoundStop failed(JobFailure failure) { return {std::move(failure), "", -1}; }
  static RoundStop growing(std::string why) { return {std::nullopt, std::move(why), -1}; }
  static RoundStop excluding(int machine, std::string why) {
    return {std::nullopt, std::move(why), machine};
  }
  bool isGrowth() const { return !failure.has_value(); }
};

// Member `machine` (on `host`) lost, as the round's failure: cause kCauseLost, reason
// "lost: HOW (DETAIL)" ("lost: its agent is gone (its connection to the job's store closed)").
JobFailure lostFailure(const LostMachine& machine, const std::string& host,
                       const std::string& detail);

// Why a group of `machines` (at most `maxMachines`) grows: "a machine is waiting to join (the
// group has 2 of at most 3): the group re-forms to take it".
std::string growthReason(int machines, int maxMachines);

// The record as stored, and back. decodeRoundStop throws nlohmann::json::exception on a
// malformed record.
std::string encodeRoundStop(const RoundStop& stop);
RoundStop decodeRoundStop(const std::string& record);

}  // namespace accel::launcher
