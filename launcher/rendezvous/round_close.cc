#include "launcher/rendezvous/round_close.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/posix.h"
#include "launcher/base/text.h"

namespace accel::launcher {

RoundCloser::RoundCloser(GroupSettings settings, bool master)
    : settings_(std::move(settings)), master_(master), everyone_decides_(settings_.leaderless) {}

RoundDecision RoundCloser::close(store::Store& store, const RoundStart& start,
                                 const RendezvousResult& joined, AttemptReport& last, bool stopping,
                                 const GroupNow& now) {
  const int round = start.round;
  last.job_failure.reset();
  readRoundStop(store, settings_, round, last, settings_.timeouts.failure_read);
  RoundEnd mine{joined.machine_rank, settings_.host, !stopping, "", last.progressed()};
  try {
    if (stopping) return leave(store, round, mine, last);
    reportRoundEnd(store, settings_, round, mine);
    if (!master_ && !everyone_decides_) {
      const auto& t = settings_.timeouts;
      auto decision = readDecision(store, settings_, round, t.close + t.decision_margin);
      if (!decision) return {false, decision.error()};
      return *decision;
    }
    if (everyone_decides_) return awaitDecider(store, start, joined, last, now);
    return publishDecision(store, settings_, round, decide(store, start, joined, last, now));
  } catch (const Error& e) {
    return {false, storeLost(settings_, e.what())};
  }
}

// Told to stop: said in passing (the master may be gone too), and this agent leaves now.
RoundDecision RoundCloser::leave(store::Store& store, int round, const RoundEnd& mine,
                                 const AttemptReport& last) {
  RoundEnd leaving = mine;
  leaving.why_not = last.excluded_machine == mine.machine_rank
                        ? "it is excluded as a straggler's machine"
                        : "its agent was told to stop (" + signalName(last.agent_signal) + ")";
  if (master_ && !everyone_decides_) {
    publishDecision(store, settings_, round,
                    {false, "machine 0 (" + settings_.host + ") stops: " + leaving.why_not});
  } else {
    reportRoundEnd(store, settings_, round, leaving);
  }
  return {false, ""};
}

namespace {

// The lowest machine of a round of `machines` that is not among `lost`.
int lowestNotLost(int machines, const std::vector<LostMachine>& lost) {
  for (int m = 0; m < machines; ++m) {
    if (std::none_of(lost.begin(), lost.end(),
                     [m](const LostMachine& l) { return l.machine == m; }))
      return m;
  }
  return machines;
}

}  // namespace

// Leaderless: the round's lowest member not found lost decides (it alone reads every report:
// each agent's cost stays the same at any size); the others wait for its decision, looking again
// at who is lost after one keep-alive window, then two, four, ... — when the one waited for is
// lost too, the next decides, this agent once its turn comes. One that waited out the whole close
// decides as well (the first decision published stands).
RoundDecision RoundCloser::awaitDecider(store::Store& store, const RoundStart& start,
                                        const RendezvousResult& joined, AttemptReport& last,
                                        const GroupNow& now) {
  const auto& t = settings_.timeouts;
  const auto deadline = settings_.clock->now() + t.close + t.decision_margin;
  std::chrono::milliseconds window = t.keep_alive_interval * t.keep_alive_misses;
  while (lowestNotLost(joined.size, now.lost()) != joined.machine_rank) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - settings_.clock->now());
    if (left.count() <= 0) break;
    if (auto d = decisionWithin(store, settings_, start.round, std::min(left, window))) {
      memory_.remember(last.job_failure, d->progress);
      return *d;
    }
    window *= 2;  // a decider slow to read every report is not asked after ever more often
  }
  return publishDecision(store, settings_, start.round, decide(store, start, joined, last, now));
}

// The master: once every machine's workers ended, the decision for the whole job.
RoundDecision RoundCloser::decide(store::Store& store, const RoundStart& start,
                                  const RendezvousResult& joined, const AttemptReport& last,
                                  const GroupNow& now) {
  RoundFacts facts = factsOf(start, joined, last);
  // The link still watches the members: one lost meanwhile is not waited for.
  facts.ends = awaitRoundEnds(store, settings_, start.round, facts.machines,
                              settings_.timeouts.close, [&now] {
                                std::vector<int> lost;
                                for (const auto& l : now.lost()) lost.push_back(l.machine);
                                return lost;
                              });
  facts.lost = now.lost();
  for (const auto& e : facts.ends) facts.progress = facts.progress || e.progress;
  // Machines registered for the next round by now (one that arrived during the wait included).
  facts.waiting = now.waiting();
  return memory_.decide(std::move(facts));
}

RoundFacts RoundCloser::factsOf(const RoundStart& start, const RendezvousResult& joined,
                                const AttemptReport& last) const {
  RoundFacts facts;
  facts.round = start.round;
  facts.restart_count = joined.restart_count;
  facts.machines = joined.size;
  facts.max_machines = settings_.num_machines;
  facts.min_machines = settings_.min_machines;
  facts.elastic = settings_.elastic();
  for (const auto& m : joined.machines) facts.hosts.push_back(m.host);
  facts.max_restarts = joined.max_restarts;
  facts.retry_identical_failures = settings_.retry_identical_failures;
  facts.failure = last.job_failure;
  facts.joined = last.regrouped;
  facts.progress = last.progressed();  // the master's board sees every rank's heartbeat
  facts.heartbeats = last.heartbeats();
  return facts;
}

// What stopped the round, as published (every stopped round has it, unless the store went):
// its first failure, or the group's growth (no failure: the group re-forms).
void readRoundStop(store::Store& store, const GroupSettings& settings, int round,
                   AttemptReport& last, std::chrono::milliseconds wait) {
  const std::string key = roundKeys(settings, round).stop();
  std::optional<RoundStop> stop;
  try {
    if (wait.count() > 0 || store.check({key})) {
      stop = decodeRoundStop(store.get(key, std::max(wait, std::chrono::milliseconds(1))));
    }
  } catch (const std::exception&) {
  }
  if (!stop) return;
  if (stop->isGrowth()) {
    if (!last.regrouped) last.regrouped = std::move(stop->grows);
    last.excluded_machine = stop->excluded;
  } else {
    last.job_failure = std::move(stop->failure);
  }
}

}  // namespace accel::launcher
