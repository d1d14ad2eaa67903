#include "launcher/rendezvous/c10d/store_rounds.h"

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

StoreRounds::StoreRounds(const LaunchPlan& plan, const probes::Environment& parentEnv,
                         Notify notify, std::optional<int> requestedRank, int storePort,
                         std::unique_ptr<GroupStore> store, std::shared_ptr<Clock> clock)
    : plan_(plan),
      parent_env_(parentEnv),
      notify_(std::move(notify)),
      store_port_(storePort),
      store_(std::move(store)),
      host_(store_->host()) {
  settings_ = groupSettingsOf(plan_);
  settings_.clock = std::move(clock);
  settings_.requested_machine_rank = requestedRank;
  settings_.store_address = store_->address();
  settings_.progress = [this](const std::string& status) { notify_("rendezvous: " + status); };
}

StoreRounds::~StoreRounds() { link_.reset(); }

std::unique_ptr<RoundGroup> makeStoreGroup(const LaunchPlan& plan,
                                           const probes::Environment& parentEnv,
                                           const Notify& notify, std::optional<int> requestedRank,
                                           int storePort, std::unique_ptr<GroupStore> store,
                                           std::shared_ptr<Clock> clock) {
  return std::make_unique<RoundGroup>(
      notify, std::make_unique<StoreRounds>(plan, parentEnv, notify, requestedRank, storePort,
                                            std::move(store), std::move(clock)));
}

std::string StoreRounds::presenceWaitPrefix(const std::string& rendezvousId) {
  return JobKeys::stored(JobKeys(rendezvousId).presencePrefix());
}

// "cannot reach the master agent (machine_rank 0) at HOST:PORT (--rdzv_endpoint): ..." — named
// by the flag the user gave.
std::string StoreRounds::unreachable(const std::exception& e) const {
  return "cannot reach the master agent (machine_rank 0) at " + settings_.store_address + " (" +
         plan_.address_flag + "): " + e.what();
}

std::string StoreRounds::trackedWaitPrefix(const std::string& rendezvousId) {
  return JobKeys::stored(JobKeys(rendezvousId).stopPrefix());
}

// This agent's presence for the whole job: a WAIT on its own presence key, parked before it
// registers anywhere, on its connection to the store, which lives as long as the agent (its
// process's death closes it) and serves its calls meanwhile (one connection per agent: at 16,384
// machines the master's store holds 16,384 descriptors for the round, not twice as many). The
// master, whose store it is, tells which registered agents are still there.
void StoreRounds::parkPresence() {
  settings_.presence = agentToken(settings_.host);
  client_->park({jobKeys(settings_).presence(settings_.presence)});
  if (!master()) return;
  // A registration read right after it was written may come before its agent's WAIT was
  // parked (the master's look may be a pass of the store's loop behind): it gets a moment before
  // it counts as gone.
  settings_.present = [this](const std::string& token) {
    return present(token, timeouts().presence_grace);
  };
}

// An agent found gone never comes back (a new one has a new token): remembered, so that a dead
// registration costs the presence grace once, not at every look of every round.
bool StoreRounds::present(const std::string& token, std::chrono::milliseconds grace) const {
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
Expected<void> StoreRounds::checkJobId() {
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

// What the rendezvous decided, as the workers will see it.
Placement StoreRounds::placementOf(const RendezvousResult& joined) const {
  Placement p = staticPlacement(plan_, store_port_);
  p.machine_rank = joined.machine_rank;  // differs from the request when ranked by arrival
  p.rank_offset = joined.rank_offset;
  p.world_size = joined.world_size;
  p.num_machines = joined.size;
  p.restart_count = joined.restart_count;
  p.socket_interface = chooseSocketInterface(parent_env_, interfaceToOthers(joined, to_master_));
  return p;
}

Expected<RoundStart> StoreRounds::enter() {
  if (client_) {  // again, after the store was out of reach: its route is known
    if (auto back = reachAgain(); !back) return std::move(back).takeError();
  } else {
    // Before anything is spawned: the master must be reachable, from an interface we can name.
    auto reached = store_->reach(timeouts().join, timeouts().connect_progress, notify_);
    if (!reached) return makeError(reached.error());
    to_master_ = *reached;
  }
  // --local_addr (torchrun's) names this machine's address for the others; else the route's.
  settings_.address = plan_.local_addr.value_or(to_master_ ? to_master_->local_ip : "");
  try {
    if (!client_) client_ = store_->connect(timeouts().join);  // kept: it reconnects
    if (master()) client_->set(JobKeys::jobId(), settings_.run_id);
    parkPresence();
  } catch (const Error& e) {
    return makeError(unreachable(e));
  }
  if (master()) return RoundStart{};
  if (auto ok = checkJobId(); !ok) return std::move(ok).takeError();
  return openedRound();
}

// After the store was out of reach: knocks every knock_every until it answers, for reach_again at
// most. One that refuses connections is gone (its agent died; its machine answers), and this
// machine cannot go on without it.
Expected<void> StoreRounds::reachAgain() {
  Clock& clock = *settings_.clock;
  const auto start = clock.now(), end = start + timeouts().reach_again;
  const std::string store = "the master agent's store at " + settings_.store_address;
  while (!interrupted_) {
    const auto knocked = clock.now();
    const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min(end, knocked + timeouts().knock_every) - knocked);
    switch (store_->knock(std::max(bound, std::chrono::milliseconds(1)))) {
      case Knock::kAnswers:
        notify_("reached " + store + " again after " +
                secondsText(
                    std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - start)));
        return {};
      case Knock::kRefused:
        return makeError(store +
                         " refuses connections: machine 0's agent is gone, and this machine "
                         "cannot go on without it");
      case Knock::kSilent:
        break;
    }
    if (clock.now() >= end) {
      return makeError(store + " did not answer for " + secondsText(timeouts().reach_again) +
                       ": machine 0 is down, or this machine is still cut off from it; this "
                       "machine cannot go on without it");
    }
    clock.sleepUntil(std::min(end, knocked + timeouts().knock_every));
  }
  return makeError("interrupted while it tried to reach " + store + " again");
}

// A machine that arrives while the job runs joins the round the master opened last.
Expected<RoundStart> StoreRounds::openedRound() {
  try {
    return RoundStart{openRound(*client_, settings_, timeouts().join)};
  } catch (const NetworkError& e) {
    return makeError(unreachable(e));
  } catch (const TimeoutError& e) {
    return makeError(unreachable(e));
  } catch (const Error& e) {  // a value there that is not a round (storedNumber names it)
    return makeError("the store at " + settings_.store_address + ": " + e.what());
  }
}

Expected<RendezvousResult> StoreRounds::join(const RoundStart& start) {
  link_.reset();  // the last round's: its watch fired, or the job failed without it
  after_loss_.reset();
  if (auto ok = parkFailureWatch(start.round); !ok) return std::move(ok).takeError();
  auto result = rendezvous(*client_, settings_, start);
  if (!result) return result;
  if (result->closed.empty() && !result->spare && !settings_.elastic() &&
      result->world_size != plan_.world_size) {
    return makeError(
        "the machines disagree on the job's size: this machine expects "
        "num_processes " +
        std::to_string(plan_.world_size) + " but the machines that joined run " +
        std::to_string(result->world_size) + " processes in total");
  }
  return result;
}

// The failure watch is parked before this agent registers: once the rendezvous completes,
// every machine's watch is parked (or on its way), and the master counts them before it lets
// the round's workers start (awaitWatches: the WAITs under the stop keys' prefix).
// The publisher and the keep-alives are the job link's own connections (its thread uses them
// alone).
Expected<void> StoreRounds::parkFailureWatch(int round) {
  try {
    auto connection = [this] { return store_->connect(timeouts().connect); };
    LinkConnections& c = link_connections_;
    c.watch = connection();
    c.watch_fd = c.watch->startWait({roundKeys(settings_, round).stop()});
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

Expected<RoundLink*> StoreRounds::watch(const RoundStart& start, const RendezvousResult& joined) {
  // No member's attempt starts before every member would hear of a failure: their failure
  // watches were parked before they registered, so this takes a moment at most.
  if (master() && !host_->awaitWatches(static_cast<size_t>(joined.size), timeouts().join)) {
    notify_("not every machine's agent is watching the store for failures; it may have died");
  }
  link_ = std::make_unique<JobLink>(std::move(link_connections_), settings_, start.round,
                                    joined.machine_rank, joined.machines.front().host,
                                    linkOptions(start.round, joined));
  link_connections_ = {};
  return link_.get();
}

LinkOptions StoreRounds::linkOptions(int round, const RendezvousResult& joined) const {
  LinkOptions o;
  if (master()) {  // the master watches the members' presence in its store
    std::vector<std::string> tokens;
    for (const auto& m : joined.machines) tokens.push_back(m.presence);
    o.present = [this, tokens](int m) {
      return present(tokens[static_cast<size_t>(m)], std::chrono::milliseconds(0));
    };
    o.keep_alives = [this, keys = roundKeys(settings_, round)](int m) {
      return host_->keepAlives(keys.alive(m));
    };
  }
  o.machines = joined.size;
  o.max_machines = plan_.num_machines;
  for (const auto& m : joined.machines) o.hosts.push_back(m.host);
  return o;
}

store::Store& StoreRounds::records(std::chrono::milliseconds bound) {
  client_->setTimeout(bound);
  return *client_;
}

int StoreRounds::waiting(int round, const RendezvousResult&) const {
  try {
    return presentRegistrations(*client_, settings_, round);
  } catch (const Error&) {
    return 0;  // the store unreachable: the next round does not wait for anyone
  }
}

// Every other agent (member or spare) has left: its presence WAIT is gone. 1: this one's.
bool StoreRounds::othersGone(int) const { return master() && host_->presentCount() <= 1; }

Standing StoreRounds::standing(const std::optional<RendezvousResult>&) const {
  if (!client_) return {Standing::Kind::kCutOff, ""};
  if (!link_ || !link_->masterLost()) return {};
  if (master() || !settings_.elastic()) return {Standing::Kind::kCutOff, ""};
  if (!after_loss_) {
    const bool gone = store_->knock(timeouts().knock_every) == Knock::kRefused;
    after_loss_ = gone ? Standing{Standing::Kind::kCutOff, ""}
                       : Standing{Standing::Kind::kOutOfReach, "the master agent's store at " +
                                                                   settings_.store_address +
                                                                   " does not answer"};
  }
  return *after_loss_;
}

void StoreRounds::closeJob(int round, const std::string& why) {
  if (!master() || !client_) return;
  try {
    closeRound(*client_, settings_, round, why);
  } catch (const Error&) {
  }
}

// Spares still read the job's end from the store (closeJob): the store stays until they left —
// after a barrier that every member passed. One that ran out its bound after a failure waited
// already (as etcd's machine 0 does), for members that will not come: not once more.
void StoreRounds::afterLeaving(bool host, bool allFinished) {
  if (master() && host && allFinished) {
    host_->awaitPresentAtMost(1, timeouts().exit_after_failure);
  }
}

// The rendezvous blocks on client_ alone (made before the supervisor's loop, never replaced).
void StoreRounds::interrupt() {
  interrupted_ = true;
  if (client_) client_->interrupt();
}

void StoreRounds::stopLink() {
  if (link_) link_->stop();
}

}  // namespace accel::launcher
