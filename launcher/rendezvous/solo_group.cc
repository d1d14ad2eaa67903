#include "launcher/rendezvous/solo_group.h"

namespace accel::launcher {

SoloGroup::SoloGroup(SoloSettings settings, Placement placement, StoreHost* store, Notify notify)
    : settings_(std::move(settings)),
      placement_(std::move(placement)),
      store_(store),
      notify_(std::move(notify)) {}

Expected<Placement> SoloGroup::meet() {
  ++round_;
  if (store_ && round_ > 0) clearWorkerKeys(*store_, notify_);
  Placement p = placement_;
  p.restart_count = restart_count_;
  return p;
}

RoundDecision SoloGroup::endRound(AttemptReport& last, bool stopping) {
  if (stopping) return {false, ""};  // the agent's signal is the whole story
  RoundFacts facts;
  facts.one_machine = true;
  facts.round = round_;
  facts.restart_count = restart_count_;
  facts.machines = facts.max_machines = facts.min_machines = 1;
  facts.ends.push_back(RoundEnd{placement_.machine_rank, settings_.host, true, ""});
  facts.max_restarts = settings_.max_restarts;
  facts.retry_identical_failures = settings_.retry_identical_failures;
  facts.failure = failureOf(last, placement_.machine_rank, settings_.host);
  facts.progress = last.progressed();
  facts.heartbeats = last.heartbeats();
  const RoundDecision decision = memory_.decide(std::move(facts));
  if (decision.restart) restart_count_ = decision.restart_count;
  return decision;
}

}  // namespace accel::launcher
