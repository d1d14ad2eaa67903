#include "launcher/rendezvous/c10d/store_group.h"

#include <mutex>

#include "accel/error.h"
#include "launcher/base/posix.h"
#include "launcher/base/text.h"
#include "launcher/plan/worker_env.h"
#include "launcher/rendezvous/round/liveness.h"

namespace accel::launcher {
namespace {

using probes::Route;

// The interface the workers' Gloo should use: the one that reaches the other machines. A
// non-master reaches the master; the master reaches machine 1 at the address it came from.
std::string interfaceToOthers(const RendezvousResult& joined,
                              const std::optional<Route>& toMaster) {
  if (joined.machine_rank != 0) return toMaster ? toMaster->interface : "";
  for (const auto& m : joined.machines) {
    if (m.machine_rank == 0 || m.address.empty()) continue;
    if (auto route = probes::routeTo(m.address); route && !route->interface.empty()) {
      return route->interface;
    }
  }
  return "";
}

}  // namespace

StoreGroup::StoreGroup(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
                       std::optional<int> requestedRank, int storePort,
                       std::unique_ptr<GroupStore> store, std::shared_ptr<Clock> clock)
    : plan_(plan),
      parent_env_(parentEnv),
      notify_(std::move(notify)),
      requested_rank_(requestedRank),
      store_port_(storePort),
      store_(std::move(store)),
      host_(store_->host()) {
  settings_ = groupSettingsOf(plan_);
  settings_.clock = std::move(clock);
  settings_.requested_machine_rank = requested_rank_;
  settings_.store_address = store_->address();
  settings_.progress = [this](const std::string& status) { notify_("rendezvous: " + status); };
}

StoreGroup::~StoreGroup() { link_.reset(); }

std::string StoreGroup::presenceWaitPrefix(const std::string& rendezvousId) {
  return JobKeys::stored(JobKeys(rendezvousId).presencePrefix());
}

// "cannot reach the master agent (machine_rank 0) at HOST:PORT (--rdzv_endpoint): ..." — named
// by the flag the user gave.
std::string StoreGroup::unreachable(const std::exception& e) const {
  return "cannot reach the master agent (machine_rank 0) at " + settings_.store_address + " (" +
         plan_.address_flag + "): " + e.what();
}

std::string StoreGroup::trackedWaitPrefix(const std::string& rendezvousId) {
  return JobKeys::stored(JobKeys(rendezvousId).stopPrefix());
}

Expected<void> StoreGroup::connect() {
  // Before anything is spawned: the master must be reachable, from an interface we can name.
  auto reached = store_->reach(timeouts().join, timeouts().connect_progress, notify_);
  if (!reached) return makeError(reached.error());
  to_master_ = *reached;
  // --local_addr (torchrun's) names this machine's address for the others; else the route's.
  settings_.address = plan_.local_addr.value_or(to_master_ ? to_master_->local_ip : "");
  try {
    client_ = store_->connect(timeouts().join);
    if (master()) client_->set(JobKeys::jobId(), settings_.run_id);
    parkPresence();
  } catch (const Error& e) {
    return makeError(unreachable(e));
  }
  if (master()) {
    next_ = RoundStart{};
    return {};
  }
  if (auto ok = checkJobId(); !ok) return ok;
  try {  // a machine that arrives while the job runs joins the round the master opened last
    next_ = RoundStart{openRound(*client_, settings_, timeouts().join)};
  } catch (const NetworkError& e) {
    return makeError(unreachable(e));
  } catch (const TimeoutError& e) {
    return makeError(unreachable(e));
  } catch (const Error& e) {  // a value there that is not a round (storedNumber names it)
    return makeError("the store at " + settings_.store_address + ": " + e.what());
  }
  return {};
}

// This agent's presence for the whole job: a WAIT on its own presence key, parked before it
// registers anywhere, on a connection that lives as long as the agent (its process's death
// closes it). The master, whose store it is, tells which registered agents are still there.
void StoreGroup::parkPresence() {
  settings_.presence = agentToken(settings_.host);
  presence_store_ = store_->connect(timeouts().connect);
  presence_store_->startWait({jobKeys(settings_).presence(settings_.presence)});
  if (!master()) return;
  // A registration read right after it was written may come before its agent's WAIT was
  // parked (another connection): it gets a moment before it counts as gone.
  settings_.present = [this](const std::string& token) {
    return present(token, timeouts().presence_grace);
  };
}

// An agent found gone never comes back (a new one has a new token): remembered, so that a dead
// registration costs the presence grace once, not at every look of every round.
bool StoreGroup::present(const std::string& token, std::chrono::milliseconds grace) const {
  if (token.empty()) return true;
  {
    std::lock_guard lock(gone_mutex_);
    if (gone_.count(token)) return false;
  }
  if (host_->waiting(jobKeys(settings_).presence(token), grace)) return true;
  std::lock_guard lock(gone_mutex_);
  gone_.insert(token);
  return false;
}

// The store this agent reached serves this job, not another one that uses the same endpoint
// (its host names its job before anything else; a store with no accel agent never does).
Expected<void> StoreGroup::checkJobId() {
  std::string theirs;
  try {
    theirs = client_->get(JobKeys::jobId(), timeouts().join);
  } catch (const TimeoutError&) {
    return makeError("the store at " + settings_.store_address + " names no job within " +
                     secondsText(timeouts().join) +
                     ": it is not hosted by an accel agent of this job");
  } catch (const Error& e) {
    return makeError(unreachable(e));
  }
  if (theirs == settings_.run_id) return {};
  return makeError("the store at " + settings_.store_address + " serves job '" + theirs +
                   "', but this machine's job is '" + settings_.run_id +
                   "' (--rdzv_id): two jobs on one endpoint; give every machine of a job the "
                   "same --rdzv_id, and each job its own --rdzv_endpoint");
}

Expected<Placement> StoreGroup::meet() {
  link_.reset();  // the last round's: its watch fired, or the job failed without it
  round_ = next_.value_or(round_.following());
  next_.reset();
  if (master() && round_.round > 0) clearWorkerKeys(*host_, notify_);
  auto joined = joinAsMember();
  if (!joined && interrupted_) {
    return makeError("round " + std::to_string(round_.round) + ": interrupted while it formed");
  }
  if (!joined) return std::move(joined).takeError();
  joined_ = *joined;
  // No member's attempt starts before every member would hear of a failure: their failure
  // watches were parked before they registered, so this takes a moment at most.
  if (master() && !host_->awaitWatches(joined_->machines.size(), timeouts().join)) {
    notify_("not every machine's agent is watching the store for failures; it may have died");
  }
  link_ = std::make_unique<JobLink>(std::move(link_connections_), settings_, round_.round,
                                    joined_->machine_rank, joined_->machines.front().host,
                                    linkOptions());
  link_connections_ = {};
  Placement placement = placementOf(*joined_);
  announce(placement);
  return placement;
}

// Joins rounds until one takes this machine: a spare (the group was full) tries the next.
Expected<RendezvousResult> StoreGroup::joinAsMember() {
  while (true) {
    if (auto ok = parkFailureWatch(); !ok) return std::move(ok).takeError();
    auto joined = join();
    if (!joined) return joined;
    if (!joined->closed.empty()) {
      closed_ = joined->closed;
      return makeError("the job ended before this machine could join it: " + closed_);
    }
    if (!joined->spare) return joined;
    notify_(spareNotice(round_.round, joined->round_size, plan_.num_machines));
    round_ = round_.following();
  }
}

LinkOptions StoreGroup::linkOptions() const {
  LinkOptions o;
  if (master()) {  // the master watches the members' presence in its store
    std::vector<std::string> tokens;
    for (const auto& m : joined_->machines) tokens.push_back(m.presence);
    o.present = [this, tokens](int m) {
      return present(tokens[static_cast<size_t>(m)], std::chrono::milliseconds(0));
    };
  }
  o.machines = static_cast<int>(joined_->machines.size());
  o.max_machines = plan_.num_machines;
  for (const auto& m : joined_->machines) o.hosts.push_back(m.host);
  return o;
}

// The failure watch is parked before this agent registers: once the rendezvous completes,
// every machine's watch is parked (or on its way), and the master counts them before it lets
// the round's workers start (awaitWatches: the WAITs under the stop keys' prefix).
// The publisher and the keep-alives are the job link's own connections (its thread uses them
// alone).
Expected<void> StoreGroup::parkFailureWatch() {
  try {
    auto connection = [this] { return store_->connect(timeouts().connect); };
    LinkConnections& c = link_connections_;
    c.watch = connection();
    c.watch_fd = c.watch->startWait({roundKeys(settings_, round_.round).stop()});
    keepWatchAlive(c.watch_fd, timeouts());
    c.publisher = connection();
    // Its requests are small and the store answers at once: a reply that takes longer than
    // this is a master gone quiet, and the link's thread must get back to the watch.
    c.publisher->setTimeout(timeouts().request);
    c.keep_alive = connection();
  } catch (const Error& e) {
    return makeError(std::string("cannot watch the master's store for failures: ") + e.what());
  }
  return {};
}

// Joins the round's rendezvous.
Expected<RendezvousResult> StoreGroup::join() {
  auto result = rendezvous(*client_, settings_, round_);
  if (!result) return result;
  if (result->closed.empty() && !result->spare && !plan_.elastic() &&
      result->world_size != plan_.world_size) {
    return makeError(
        "the machines disagree on the job's size: this machine expects "
        "num_processes " +
        std::to_string(plan_.world_size) + " but the machines that joined run " +
        std::to_string(result->world_size) + " processes in total");
  }
  return result;
}

// What the rendezvous decided, as the workers will see it.
Placement StoreGroup::placementOf(const RendezvousResult& joined) const {
  Placement p = staticPlacement(plan_, store_port_);
  p.machine_rank = joined.machine_rank;  // differs from the request when ranked by arrival
  p.rank_offset = joined.rank_offset;
  p.world_size = joined.world_size;
  p.num_machines = static_cast<int>(joined.machines.size());
  p.restart_count = joined.restart_count;
  p.socket_interface = chooseSocketInterface(parent_env_, interfaceToOthers(joined, to_master_));
  return p;
}

void StoreGroup::announce(const Placement& p) {
  notify_(placedText(p, plan_.local_world_size));
  if (p.socket_interface && round_.round == 0) {
    notify_("workers use GLOO_SOCKET_IFNAME=" + *p.socket_interface +
            " (the interface that reaches the other machines)");
  }
}

RoundDecision StoreGroup::endRound(AttemptReport& last, bool stopping) {
  if (link_ && link_->masterLost()) return {false, ""};  // the summary names the lost master
  // Without restarts or a changing group there is nothing to agree on (the budget is the
  // master's, published with each round): the summary still names the round's first failure.
  if (!joined_ || (joined_->max_restarts == 0 && !plan_.elastic())) {
    // One read, bounded as a link's request (a master gone quiet must not hold an agent that
    // leaves); none when this agent was told to stop: it leaves now (e2e.netns.master_unreachable).
    if (joined_ && !stopping) {
      client_->setTimeout(timeouts().request);
      readRoundStop(*client_, settings_, round_.round, last, {});
    }
    return {false, ""};
  }
  // A master gone quiet holds this agent no longer than it would wait for the master; one told
  // to stop says so in passing (the master may be gone too).
  client_->setTimeout(stopping ? timeouts().stop_said
                               : timeouts().close + timeouts().decision_margin);
  if (!closer_) closer_.emplace(settings_, master());  // the settings are complete by now
  RoundCloser::GroupNow now;
  now.lost = [this] { return link_ ? link_->lostMachines() : std::vector<LostMachine>{}; };
  // Not those whose agents died waiting (the master sees who is present).
  now.waiting = [this] { return presentRegistrations(*client_, settings_, round_.round + 1); };
  RoundDecision decision = closer_->close(*client_, round_, *joined_, last, stopping, now);
  if (decision.restart) next_ = decision.next(round_.round);  // the next round's assignment
  return decision;
}

void StoreGroup::closeJob(const std::string& why) {
  if (!master() || !client_) return;
  try {
    closeRound(*client_, settings_, round_.round + 1, why);
  } catch (const Error&) {
  }
}

// The rendezvous blocks on client_ alone (made before the supervisor's loop, never replaced).
void StoreGroup::interrupt() {
  interrupted_ = true;
  if (client_) client_->interrupt();
}

void StoreGroup::stopLink() {
  if (link_) link_->stop();
}

void StoreGroup::awaitOtherMachines() {
  if (!client_ || (link_ && link_->masterLost())) return;  // no store to wait in
  const auto afterFailure = timeouts().exit_after_failure;
  if (!master()) client_->setTimeout(afterFailure);
  // Every other agent (member or spare) has left: its presence WAIT is gone. 1: this one's.
  auto othersGone = [this] { return master() && host_->presentCount() <= 1; };
  const int machines = joined_ ? static_cast<int>(joined_->machines.size()) : plan_.num_machines;
  // A spare (not joined) says nothing finished: it was never a member.
  const int done =
      leaveRound(*client_, settings_, round_.round, joined_ ? joined_->machine_rank : -1, machines,
                 master(), othersGone, notify_);
  // Spares still read the job's end from the store (closeJob): the store stays until they left —
  // after a barrier that every member passed. One that ran out its bound after a failure waited
  // already (as etcd's machine 0 does), for members that will not come: not once more.
  if (master() && done >= machines) host_->awaitPresentAtMost(1, afterFailure);
}

}  // namespace accel::launcher
