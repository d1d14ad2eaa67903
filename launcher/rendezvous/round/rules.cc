#include "launcher/rendezvous/round/rules.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace accel::launcher {
namespace {

std::string machineText(const RoundEnd& e) {
  return "machine " + std::to_string(e.machine_rank) + " (" + e.host + ")";
}

std::string memberText(const RoundFacts& f, int m) {
  const auto at = static_cast<size_t>(m);
  return "machine " + std::to_string(m) +
         (at < f.hosts.size() && !f.hosts[at].empty() ? " (" + f.hosts[at] + ")" : "");
}

bool reported(const RoundFacts& f, int m) {
  return std::any_of(f.ends.begin(), f.ends.end(),
                     [m](const RoundEnd& e) { return e.machine_rank == m; });
}

// The members the next round goes on without, each with why: "machine 2 (h2) lost".
std::vector<std::pair<int, std::string>> droppedMembers(const RoundFacts& f) {
  std::vector<std::pair<int, std::string>> dropped;
  for (int m = 0; m < f.machines; ++m) {
    auto lost = std::find_if(f.lost.begin(), f.lost.end(),
                             [m](const LostMachine& l) { return l.machine == m; });
    if (lost != f.lost.end()) {
      dropped.emplace_back(m, memberText(f, m) + " lost (" + lost->how + ")");
    } else if (!reported(f, m)) {
      dropped.emplace_back(m, memberText(f, m) + " did not report the end of its workers");
    }
  }
  for (const auto& e : f.ends) {
    const bool already = std::any_of(dropped.begin(), dropped.end(),
                                     [&e](const auto& d) { return d.first == e.machine_rank; });
    if (!e.continues && !already) {
      dropped.emplace_back(e.machine_rank, machineText(e) + " stops: " + e.why_not);
    }
  }
  return dropped;
}

std::string joined(const std::vector<std::pair<int, std::string>>& dropped) {
  std::string out;
  for (const auto& d : dropped) out += (out.empty() ? "" : "; ") + d.second;
  return out;
}

// Whether the group can go on without `dropped`; the reason when it cannot.
std::optional<std::string> cannotGoOn(const RoundFacts& f,
                                      const std::vector<std::pair<int, std::string>>& dropped) {
  if (dropped.empty()) return std::nullopt;
  const int least = f.min_machines > 0 ? f.min_machines : f.machines;
  const int remaining = f.machines - static_cast<int>(dropped.size());
  if (!f.elastic) {
    return joined(dropped) + "; the job needs all " + std::to_string(f.machines) +
           " machines (--nnodes MIN:MAX lets a job go on with fewer)";
  }
  // Machines already registered for the next round count: a member dropped by mistake (etcd
  // revoked a live lease) that came back as a newcomer, a spare.
  if (remaining + f.waiting >= least) return std::nullopt;
  return joined(dropped) + "; " + std::to_string(remaining) + " of the " + std::to_string(least) +
         " machines the job needs remain" +
         (f.waiting > 0 ? " and " + std::to_string(f.waiting) +
                              (f.waiting == 1 ? " waits" : " wait") + " to join"
                        : "");
}

}  // namespace

namespace {

std::string failureText(const RoundFacts& f, const JobFailure& failure) {
  return f.one_machine ? describeLocalFailure(failure) : describeFailure(failure);
}

// "restarting (1 of 3)" on one machine; with several, every machine restarts.
std::string restartingText(const RoundFacts& f) {
  const std::string count =
      std::to_string(f.restart_count + 1) + " of " + std::to_string(f.max_restarts);
  if (f.one_machine) return "restarting (" + count + ")";
  return "restarting every machine (" + count + " restarts, counted for the whole job)";
}

}  // namespace

RoundDecision decideNextRound(const RoundFacts& f) {
  const auto dropped = droppedMembers(f);
  if (auto why = cannotGoOn(f, dropped)) return {false, *why};
  const int most = f.max_machines > 0 ? f.max_machines : f.machines;
  const int expect = std::min(most, f.machines - static_cast<int>(dropped.size()) + f.waiting);
  if (f.joined)
    return {true, *f.joined + " (not counted as a restart)", false, f.restart_count, expect};
  if (!f.failure) return {false, "no failure of the attempt was published"};
  if (f.failure->rank < 0 && f.failure->cause.empty() && dropped.empty())
    return {false, failureText(f, *f.failure)};
  if (f.restart_count >= f.max_restarts) {
    if (f.max_restarts == 0 && !f.elastic) return {false, ""};  // no restart was asked for
    return {false, "the job's " + std::to_string(f.max_restarts) +
                       (f.max_restarts == 1 ? " restart is" : " restarts are") + " spent"};
  }
  if (f.previous && !f.retry_identical_failures && dropped.empty()) {
    if (auto why =
            repeatedFailure(f.round - 1, *f.previous, f.previous_progress, f.round, *f.failure,
                            f.progress, f.heartbeats, failureText(f, *f.failure))) {
      return {false, *why + "; a restart would fail again (--retry_identical_failures retries)"};
    }
  }
  const std::string without = dropped.empty() ? "" : "; going on without " + joined(dropped);
  return {true,
          "attempt " + std::to_string(f.round) + " failed (" + failureText(f, *f.failure) + ")" +
              without + "; " + restartingText(f),
          true, f.restart_count + 1, expect};
}

RoundDecision RoundMemory::decide(RoundFacts facts) {
  facts.previous = failure_;
  facts.previous_progress = progress_;
  RoundDecision decision = decideNextRound(facts);
  failure_ = facts.failure;
  progress_ = facts.progress;
  decision.progress = facts.progress;
  return decision;
}

void RoundMemory::remember(const std::optional<JobFailure>& failure, bool progress) {
  failure_ = failure;
  progress_ = progress;
}

}  // namespace accel::launcher
