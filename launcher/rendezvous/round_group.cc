#include "launcher/rendezvous/round_group.h"

#include "launcher/base/text.h"
#include "launcher/rendezvous/round_records.h"

namespace accel::launcher {

RoundGroup::RoundGroup(Notify notify, std::unique_ptr<RoundBackend> backend)
    : notify_(std::move(notify)), backend_(std::move(backend)) {}

RoundGroup::~RoundGroup() = default;

Expected<void> RoundGroup::connect() {
  auto first = backend_->enter();
  if (!first) return std::move(first).takeError();
  next_ = *first;
  return {};
}

void RoundGroup::interrupt() {
  interrupted_ = true;
  backend_->interrupt();
}

Expected<Placement> RoundGroup::meet() {
  stopLink();
  link_ = nullptr;   // the backend replaces the last round's link as it watches the next
  if (rejoining_) {  // a new agent as far as the others can tell: a new presence
    rejoining_ = false;
    auto entered = backend_->enter();
    if (!entered) return std::move(entered).takeError();
    next_ = *entered;
  }
  round_ = next_.value_or(round_.following());
  next_.reset();
  if (auto healthy = awaitHealthy(); !healthy) return std::move(healthy).takeError();
  // Before it registers: should this machine be the round's machine 0, the members' workers
  // write to its store from the instant the round closes. Every worker that used it before has
  // ended (the round before's end waited for them all).
  if (StoreHost* store = backend_->hostedStore(); store && round_.round > 0) {
    clearWorkerKeys(*store, notify_);
  }
  auto joined = joinAsMember();
  if (!joined && interrupted_) {
    return makeError("round " + std::to_string(round_.round) + ": interrupted while it formed");
  }
  if (!joined) return std::move(joined).takeError();
  joined_ = *joined;
  round_.restart_count = joined_->restart_count;  // the record's, whoever closed the round
  auto link = backend_->watch(round_, *joined_);
  if (!link) return std::move(link).takeError();
  link_ = *link;
  Placement placement = backend_->placementOf(*joined_);
  announce(placement);
  return placement;
}

void RoundGroup::setHealthGate(HealthGate gate, std::chrono::milliseconds interval) {
  health_ = std::move(gate);
  health_interval_ = interval;
}

// Before it registers: a machine that fails its health checks stays out of the round and looks
// again every interval (in pauses of at most 100 ms, so that an interrupt ends the wait at once);
// it says so when it fails, again when the reason changes, and when it passes again.
Expected<void> RoundGroup::awaitHealthy() {
  if (!health_) return {};
  Clock& clock = *settings().clock;
  std::optional<std::string> said;
  while (true) {
    const auto why = health_();
    if (!why) {
      if (said) notify_("health checks pass again: this machine joins the job");
      return {};
    }
    if (why != said) {
      notify_("this machine fails its health check (" + *why + "): it stays out of round " +
              std::to_string(round_.round) + " and checks again every " +
              secondsText(health_interval_));
      said = why;
    }
    const auto again = clock.now() + health_interval_;
    while (clock.now() < again) {
      if (interrupted_) {
        return makeError("round " + std::to_string(round_.round) +
                         ": interrupted while this machine waited to pass its health check");
      }
      clock.sleepUntil(std::min(again, clock.now() + std::chrono::milliseconds(100)));
    }
  }
}

// Joins rounds until one takes this machine: a spare (the round closed without it) tries the
// next, with the restart count its record knows.
Expected<RendezvousResult> RoundGroup::joinAsMember() {
  while (true) {
    auto joined = backend_->join(round_);
    if (!joined) return joined;
    if (!joined->closed.empty()) {
      closed_ = joined->closed;
      return makeError("the job ended before this machine could join it: " + closed_);
    }
    if (!joined->spare) return joined;
    notify_(spareNotice(round_.round, joined->round_size, settings().num_machines));
    round_ = RoundStart{round_.round + 1, joined->restart_count, 0};
  }
}

// "machine 1 of 3: ranks 2–3 of 6" — and, where machine 0 may be any agent (etcd), whose store
// the workers use; the workers' interface once, the first time one is chosen.
void RoundGroup::announce(const Placement& p) {
  std::string placed = placedText(p, settings().local_world_size);
  if (settings().leaderless) {
    placed += "; the workers' store is machine 0's (" + joined_->machines.front().host + ", " +
              p.master_addr + ":" + std::to_string(p.master_port) + ")";
  }
  notify_(placed);
  if (p.socket_interface && !interface_said_) {
    interface_said_ = true;
    notify_("workers use GLOO_SOCKET_IFNAME=" + *p.socket_interface +
            " (the interface that reaches the other machines)");
  }
}

// Round's stop record into `last` when it is there now (bounded as one of a link's requests: a
// rendezvous gone quiet must not hold an agent that leaves).
void RoundGroup::readStopOf(AttemptReport& last) {
  if (!joined_) return;
  readRoundStop(backend_->records(settings().timeouts.request), settings(), round_.round, last, {});
}

RoundDecision RoundGroup::endRound(AttemptReport& last, bool stopping) {
  const Standing standing = backend_->standing(joined_);
  if (standing.kind == Standing::Kind::kCutOff) return {false, ""};  // the summary names it
  const bool dropped =
      standing.kind == Standing::Kind::kDropped || standing.kind == Standing::Kind::kOutOfReach;
  if (dropped && !stopping && settings().elastic()) return comeBack(last, standing);
  // The others may go on without a machine that stops or was dropped — unless it is the one
  // that hosts the rendezvous.
  if ((stopping || dropped) && !backend_->decidesAlone()) leaving_alone_ = true;
  // Without restarts or a changing group there is nothing to agree on (the budget is machine 0's,
  // published with each round): the summary still names the round's first failure — read unless
  // this agent was told to stop (it leaves now: e2e.netns.master_unreachable).
  if (!joined_ || (joined_->max_restarts == 0 && !settings().elastic()) || dropped) {
    if (!stopping) readStopOf(last);
    return {false, ""};
  }
  // A rendezvous gone quiet holds this agent no longer than it would wait for the decision; one
  // told to stop says so in passing (machine 0 may be gone too).
  const auto& t = settings().timeouts;
  store::Store& records = backend_->records(stopping ? t.stop_said : t.close + t.decision_margin);
  if (!closer_) closer_.emplace(settings(), backend_->decidesAlone());
  RoundCloser::GroupNow now;
  now.lost = [this] { return link_ ? link_->lostMachines() : std::vector<LostMachine>{}; };
  now.waiting = [this] { return backend_->waiting(round_.round + 1, *joined_); };
  RoundDecision decision = closer_->close(records, round_, *joined_, last, stopping, now);
  if (decision.restart) next_ = decision.next(round_.round);
  return decision;
}

// The others dropped this machine (silent past the keep-alive window: frozen or cut off) and went
// on without it, or the rendezvous stopped answering it (then, if it was cut off, the others go on
// without it); its workers have stopped. It joins the job again as a newcomer — a new presence,
// a registration in the round the members opened last, once it reaches the rendezvous — and the
// group takes it when it has room (a re-forming, as for any arrival); not a restart of its own.
RoundDecision RoundGroup::comeBack(AttemptReport& last, const Standing& standing) {
  rejoining_ = true;
  if (standing.kind == Standing::Kind::kOutOfReach) {
    return {true,
            standing.why + "; this machine tries to reach it again for up to " +
                secondsText(settings().timeouts.reach_again) +
                " and then joins the job again as a newcomer (if it was cut off, the others go "
                "on without it meanwhile)",
            /*counted=*/false, round_.restart_count, 0};
  }
  readStopOf(last);
  return {true,
          "this machine was dropped by the others (" + standing.why +
              "); it joins the job again as a newcomer",
          /*counted=*/false, round_.restart_count, 0};
}

// Unless this machine leaves alone (told to stop, or dropped by the others): then the job may go
// on without it, and its spares are not told it ended.
void RoundGroup::closeJob(const std::string& why) {
  if (leaving_alone_) return;
  backend_->closeJob(round_.round + 1, why);
}

// Every member says it finished (so that its going is judged left, not lost); the agent whose
// store served the workers waits for the others to be done with it (leaveRound). A spare, never
// a member, says nothing — unless it hosts the rendezvous, whose store the others still read.
void RoundGroup::awaitOtherMachines() {
  if (backend_->standing(joined_).kind != Standing::Kind::kMember) return;  // no store to wait in
  const bool host = joined_ ? joined_->machine_rank == 0 : backend_->decidesAlone();
  if (!joined_ && !host) return;
  const int machines = joined_ ? joined_->size : settings().num_machines;
  const int round = round_.round;
  const int done = leaveRound(
      backend_->records(settings().timeouts.exit_after_failure), settings(), round,
      joined_ ? joined_->machine_rank : -1, machines, host,
      [this, round] { return backend_->othersGone(round); }, notify_);
  backend_->afterLeaving(host, done >= machines);
}

}  // namespace accel::launcher
