#pragma once
// SoloGroup: the one machine of a job that has no other (machine_group.h). meet() places it as
// the plan says, with the round's restart count; endRound() applies the one restart rule to
// the attempt this machine saw (decideNextRound with one member, that always reports: RoundMemory).

#include <optional>
#include <string>

#include "launcher/rendezvous/machine_group.h"

namespace accel::launcher {

struct SoloSettings {
  int max_restarts = 0;
  bool retry_identical_failures = false;
  std::string host;  // this machine's name
};

class SoloGroup : public MachineGroup {
 public:
  // `placement`: this machine's in every round (its restart count is the round's). `store`:
  // the job's store when the agent hosts one (its workers' keys are cleared between rounds),
  // else nullptr. It must outlive the group.
  SoloGroup(SoloSettings settings, Placement placement, StoreHost* store, Notify notify);

  Expected<Placement> meet() override;
  int round() const override { return round_; }
  RoundLink* link() const override { return nullptr; }
  RoundDecision endRound(AttemptReport& last, bool stopping) override;
  void closeJob(const std::string&) override {}
  void stopLink() override {}
  void awaitOtherMachines() override {}
  std::string host() const override { return settings_.host; }
  std::string statusKeyPrefix() const override { return ""; }

 private:
  const SoloSettings settings_;
  const Placement placement_;
  StoreHost* const store_;
  const Notify notify_;
  int round_ = -1;  // none met yet
  int restart_count_ = 0;
  RoundMemory memory_;  // the round before's failure, for the no-blind-retry rule
};

}  // namespace accel::launcher
