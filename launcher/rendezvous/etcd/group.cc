#include "launcher/rendezvous/etcd/group.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "accel/error.h"
#include "launcher/base/event_fd.h"
#include "launcher/base/text.h"
#include "launcher/plan/worker_env.h"
#include "launcher/rendezvous/round/stored_number.h"
#include "probes/net_check.h"

namespace accel::launcher {
EtcdGroup::EtcdGroup(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
                     EtcdOptions etcd, std::string root, int storePort, StoreHost* store,
                     EtcdAccess access)
    : plan_(plan),
      parent_env_(parentEnv),
      notify_(std::move(notify)),
      etcd_(std::move(etcd)),
      access_(std::move(access)),
      root_(std::move(root)),
      store_port_(storePort),
      store_host_(store) {
  settings_ = groupSettingsOf(plan_);
  settings_.clock = access_.clock;
  settings_.store_address = etcdText();
  settings_.leaderless = true;
  interrupt_fd_ = makeEventFd();  // (-1: an interrupt is acted on when the round forms)
}

void EtcdGroup::interrupt() { signalEventFd(interrupt_fd_); }

EtcdGroup::~EtcdGroup() {
  {
    std::lock_guard lock(link_mutex_);
    link_.reset();
  }
  lease_.reset();  // revoked: this agent's registrations go at once
  if (interrupt_fd_ >= 0) ::close(interrupt_fd_);
}

std::string EtcdGroup::etcdText() const {
  std::string all;
  for (const auto& e : etcd_.endpoints) all += (all.empty() ? "" : ",") + e.text();
  return "etcd at " + all;
}

// The address the other machines are told to reach this one by: --local_addr, else the source
// address of the route to etcd — the first endpoint, in sorted order, whose route leaves this
// machine (so the choice does not depend on the order the endpoints were given in, nor on the
// first one resolving) — unless every endpoint is reached through loopback (etcd runs here and
// was named so, as TorchX names the first pod's "localhost:2379"): then the first interface that
// is up and not loopback. Said once, either way.
std::string EtcdGroup::advertisedAddress() const {
  if (plan_.local_addr) return *plan_.local_addr;
  std::vector<std::string> hosts;
  for (const auto& e : etcd_.endpoints) hosts.push_back(e.host);
  std::sort(hosts.begin(), hosts.end());
  std::optional<probes::Route> loopback;
  std::string loopbackHost;
  for (const auto& h : hosts) {
    auto route = probes::routeTo(h);
    if (!route) continue;
    if (!probes::isLoopback(*route)) {
      notify_("the other machines are told to reach this one at " +
              probes::describeInterface(*route) + ", the route to etcd (" + h +
              ") (--local_addr names another address)");
      return route->local_ip;
    }
    if (!loopback) loopback = *route, loopbackHost = h;
  }
  if (!loopback) return "";  // no endpoint resolves: connect() says so
  auto outward = probes::outwardRoute();
  if (!outward) return loopback->local_ip;  // no other interface: the job is on this machine alone
  notify_("etcd (" + loopbackHost +
          ") is reached through loopback here: the other machines are told "
          "to reach this one at " +
          probes::describeInterface(*outward) + " (--local_addr names another address)");
  return outward->local_ip;
}

Expected<void> EtcdGroup::connect() {
  me_ = {agentToken(settings_.host), settings_.host, advertisedAddress(), plan_.local_world_size,
         store_port_};
  // The agents spread over etcd's endpoints (each client starts at this agent's own, and goes on
  // to the next when it fails), so that one member gone is not every agent's problem at once.
  etcd_.first_endpoint = std::hash<std::string>{}(me_.token);
  try {
    client_ = access_.connect(etcd_);
    store_ = std::make_unique<EtcdStore>(
        etcd_, root_.empty() ? "" : root_.substr(0, root_.size() - 1), access_);
  } catch (const std::exception& e) {
    return makeError("cannot reach " + etcdText() + " (--rdzv_endpoint): " + e.what());
  }
  return enterJob();
}

// Takes a lease for this agent (its registrations are attached to it) and reads where the job
// is: the round its members opened last, the restarts used. Round 0's connect, and a machine the
// others dropped coming back as a newcomer.
Expected<void> EtcdGroup::enterJob() {
  try {
    lease_ = std::make_unique<EtcdLease>(
        access_, etcd_, settings_.timeouts, [this](const std::string& why) { onLeaseLost(why); },
        notify_);
    const JobKeys keys(settings_.run_id, root_);
    // A machine arriving while the job runs joins the round the members opened last.
    auto open = client_->get(keys.openRound());
    auto restarts = client_->get(keys.restarts());
    next_ = RoundStart{open ? storedInt(open->key, open->value) : 0,
                       restarts ? storedInt(restarts->key, restarts->value) : 0, 0};
    if (open && next_->round > 0) noteRunningRound(next_->round - 1);
  } catch (const NetworkError& e) {
    return makeError("cannot reach " + etcdText() + " (--rdzv_endpoint): " + e.what());
  } catch (const std::exception& e) {
    return makeError(etcdText() + " (--rdzv_endpoint), job '" + settings_.run_id +
                     "': " + e.what());
  }
  return {};
}

// A machine that comes while the job runs round `running` waits for a later one: said at once,
// as the spare it is when the group is full (else the group re-forms to take it).
void EtcdGroup::noteRunningRound(int running) {
  EtcdRoundSettings keys;
  keys.root = root_;
  keys.run_id = settings_.run_id;
  const int64_t registered = client_->countPrefix(etcdRoundKeys(keys, running).memberPrefix());
  const int machines = static_cast<int>(std::min<int64_t>(registered, plan_.num_machines));
  if (machines > 0) notify_(spareNotice(running, machines, plan_.num_machines));
}

void EtcdGroup::onLeaseLost(const std::string& why) {
  std::lock_guard lock(link_mutex_);
  if (link_) link_->leaseLost(why);
}

EtcdRoundSettings EtcdGroup::roundSettings() const {
  EtcdRoundSettings s;
  s.root = root_;
  s.run_id = settings_.run_id;
  s.min_machines = plan_.min_machines;
  s.max_machines = plan_.num_machines;
  s.timeouts = settings_.timeouts;
  s.expect_machines = round_.expect_machines;
  s.restart_count = round_.restart_count;
  s.lease = lease_->id();
  s.clock = access_.clock;
  s.cancel_fd = interrupt_fd_;
  s.progress = [this](const std::string& status) { notify_("rendezvous: " + status); };
  return s;
}

// Joins rounds until one takes this machine: a spare (the round was full) tries the next.
Expected<EtcdRound> EtcdGroup::joinRound() {
  while (true) {
    Expected<EtcdRound> r = makeError("");
    try {
      r = meetOnEtcd(*client_, roundSettings(), round_.round, me_);
    } catch (const std::exception& e) {
      return makeError("cannot reach " + etcdText() + ": " + e.what());
    }
    if (!r) return r;
    if (!r->closed.empty()) {
      closed_ = r->closed;
      return makeError("the job ended before this machine could join it: " + closed_);
    }
    if (r->machine_rank >= 0) return r;
    notify_(spareNotice(round_.round, static_cast<int>(r->members.size()), plan_.num_machines));
    round_ = RoundStart{round_.round + 1, r->restart_count, 0};  // the count the record knows
  }
}

Expected<Placement> EtcdGroup::meet() {
  stopLink();
  if (rejoining_) {  // a new agent as far as the others can tell: a new token, a new lease
    rejoining_ = false;
    me_.token = agentToken(settings_.host);
    next_.reset();
    if (auto ok = enterJob(); !ok) return std::move(ok).takeError();
  }
  round_ = next_.value_or(round_.following());
  next_.reset();
  // Before it registers: should this machine be the round's machine 0, the members' workers
  // write to its store from the instant the round closes. Every worker that used it before has
  // ended (the round before's end waited for them all).
  if (round_.round > 0 && store_host_) clearWorkerKeys(*store_host_, notify_);
  auto joined = joinRound();
  if (!joined) return std::move(joined).takeError();
  joined_ = *joined;
  round_.restart_count = joined_->restart_count;
  EtcdLinkOptions o;
  o.etcd = etcd_;
  o.connect = access_.connect;
  o.round_settings = roundSettings();
  o.round = round_.round;
  o.machine_rank = joined_->machine_rank;
  o.members = joined_->members;
  o.window = lease_->ttl();
  try {
    const JobKeys keys(settings_.run_id, root_);
    // Not under the lease: it tells the others, once the lease ended, that this agent lived past
    // the round's close (etcd/link.h).
    client_->put(keys.round(round_.round).started(joined_->machine_rank), "1");
    client_->put(keys.openRound(), std::to_string(round_.round + 1));
    client_->put(keys.restarts(), std::to_string(round_.restart_count));
    auto link = std::make_unique<EtcdLink>(o);
    std::lock_guard lock(link_mutex_);
    link_ = std::move(link);
    if (auto lost = lease_->lost()) link_->leaseLost(*lost);
  } catch (const std::exception& e) {
    return makeError("cannot reach " + etcdText() + ": " + e.what());
  }
  Placement p = placementOf(*joined_);
  notify_(placedText(p, plan_.local_world_size) + "; the workers' store is machine 0's (" +
          joined_->members.front().host + ", " + p.master_addr + ":" +
          std::to_string(p.master_port) + ")");
  return p;
}

// The round as the workers see it: machine 0's agent's store is theirs.
Placement EtcdGroup::placementOf(const EtcdRound& r) const {
  const EtcdMember& zero = r.members.front();
  Placement p = staticPlacement(plan_, zero.store_port);
  p.master_addr = zero.address.empty() ? "127.0.0.1" : zero.address;
  p.master_port = zero.store_port;
  p.machine_rank = r.machine_rank;
  p.rank_offset = r.rank_offset;
  p.world_size = r.world_size;
  p.num_machines = static_cast<int>(r.members.size());
  p.restart_count = r.restart_count;
  auto route = probes::routeTo(r.machine_rank == 0 && r.members.size() > 1 ? r.members[1].address
                                                                           : p.master_addr);
  p.socket_interface = chooseSocketInterface(
      parent_env_, route && !route->interface.empty() ? route->interface : "");
  return p;
}

RendezvousResult EtcdGroup::asRendezvousResult(const EtcdRound& r) const {
  RendezvousResult rr;
  rr.machine_rank = r.machine_rank;
  rr.rank_offset = r.rank_offset;
  rr.world_size = r.world_size;
  rr.max_restarts = plan_.max_restarts;
  rr.restart_count = r.restart_count;
  int offset = 0;
  for (size_t m = 0; m < r.members.size(); ++m) {
    const auto& e = r.members[m];
    rr.machines.push_back(
        {e.host, e.token, e.address, e.local_world_size, static_cast<int>(m), offset});
    offset += e.local_world_size;
  }
  return rr;
}

// Whether the others dropped this machine: its lease is lost, or the round's link heard this
// machine named lost (an agent that was frozen past its lease's end may hear that before its next
// renewal is refused).
bool EtcdGroup::droppedByOthers() const {
  if (lease_->lost()) return true;
  std::lock_guard lock(link_mutex_);
  if (!link_ || !joined_) return false;
  for (const auto& m : link_->lostMachines()) {
    if (m.machine == joined_->machine_rank) return true;
  }
  return false;
}

RoundDecision EtcdGroup::endRound(AttemptReport& last, bool stopping) {
  const bool dropped = droppedByOthers();  // the summary names it (the link's event)
  if (dropped && !stopping && plan_.elastic()) return comeBack(last);
  if (stopping || dropped) leaving_alone_ = true;  // the others may go on without it
  if (!joined_ || (plan_.max_restarts == 0 && !plan_.elastic()) || dropped) {
    // Nothing to agree on; the summary still names the round's first failure (etcd permitting).
    if (joined_) readRoundStop(*store_, settings_, round_.round, last, {});
    return {false, ""};
  }
  if (!closer_) closer_.emplace(settings_, false);
  RoundCloser::GroupNow now;
  now.lost = [this] {
    std::lock_guard lock(link_mutex_);
    return link_ ? link_->lostMachines() : std::vector<LostMachine>{};
  };
  now.waiting = [this] { return waitingForNextRound(); };
  RoundDecision decision =
      closer_->close(*store_, round_, asRendezvousResult(*joined_), last, stopping, now);
  if (decision.restart) next_ = decision.next(round_.round);
  return decision;
}

// The others dropped this machine (etcd ended its lease: it was silent for the window, frozen or
// cut off) and went on without it; its workers have stopped. It joins the job again as a
// newcomer — a new lease, a new registration in the round the members opened last — and the
// group takes it when it has room (a re-forming, as for any arrival); not a restart of its own.
RoundDecision EtcdGroup::comeBack(AttemptReport& last) {
  if (joined_) readRoundStop(*store_, settings_, round_.round, last, {});
  rejoining_ = true;
  const std::string why = lease_->lost().value_or("the others found it lost");
  return {
      true,
      "this machine was dropped by the others (" + why + "); it joins the job again as a newcomer",
      /*counted=*/false, round_.restart_count, 0};
}

// The machines registered for the next round that are not this round's members (a member may
// have registered already, having decided first): a registration lives as long as its agent's
// lease, so one whose agent died waiting is gone once the lease window passed.
int EtcdGroup::waitingForNextRound() const {
  std::set<std::string> members;
  for (const auto& m : joined_->members) members.insert(m.token);
  const std::string prefix = etcdRoundKeys(roundSettings(), round_.round + 1).memberPrefix();
  try {
    int waiting = 0;
    for (const auto& kv : client_->getPrefix(prefix)) {
      if (!members.count(kv.key.substr(prefix.size()))) ++waiting;
    }
    return waiting;
  } catch (const std::exception&) {
    return 0;  // etcd unreachable: the lease tells, and the next round does not wait for anyone
  }
}

// Unless this machine leaves alone (told to stop, or dropped by the others): then the job may go
// on without it, and its spares are not told it ended.
void EtcdGroup::closeJob(const std::string& why) {
  if (!client_ || leaving_alone_) return;
  job_over_ = true;
  try {
    EtcdRoundSettings s = roundSettings();
    closeEtcdRound(*client_, s, round_.round + 1, why);
  } catch (const std::exception&) {
  }
}

// The link stays (stopped) for its lost machines until the next round replaces it.
void EtcdGroup::stopLink() {
  std::lock_guard lock(link_mutex_);
  if (link_) link_->stop();
}

// Every machine says it finished (so its lease's end is not taken for a loss); machine 0, whose
// store serves the workers, waits for the others to be done with it.
void EtcdGroup::awaitOtherMachines() {
  if (!joined_ || !store_ || lease_->lost()) return;
  const int machines = static_cast<int>(joined_->members.size());
  const bool zero = joined_->machine_rank == 0;
  const RoundKeys keys = etcdRoundKeys(roundSettings(), round_.round);
  auto othersGone = [this, keys] {
    try {
      return client_->countPrefix(keys.memberPrefix()) <= 1;
    } catch (const std::exception&) {
      return true;
    }
  };
  leaveRound(*store_, settings_, round_.round, joined_->machine_rank, machines, zero, othersGone,
             notify_);
  if (zero && job_over_) removeJob();
}

// Machine 0, the last to leave a job that ended everywhere: the job's keys go (the spares waiting
// for a later round heard its end through their watches when closeJob put it), so that the same
// command, run again with the same --rdzv_id, is a new job and not one that "ended before this
// machine could join it".
void EtcdGroup::removeJob() {
  try {
    client_->deletePrefix(JobKeys(settings_.run_id, root_).prefix());
  } catch (const std::exception& e) {
    notify_("could not remove the job's keys from " + etcdText() + " (" + e.what() +
            "): a job run again with --rdzv_id " + settings_.run_id + " would find it ended");
  }
}

}  // namespace accel::launcher
