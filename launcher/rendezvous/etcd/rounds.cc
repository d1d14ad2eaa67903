#include "launcher/rendezvous/etcd/rounds.h"

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
EtcdRounds::EtcdRounds(const LaunchPlan& plan, const probes::Environment& parentEnv, Notify notify,
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

EtcdRounds::~EtcdRounds() {
  {
    std::lock_guard lock(link_mutex_);
    link_.reset();
  }
  lease_.reset();  // revoked: this agent's registrations go at once
  if (interrupt_fd_ >= 0) ::close(interrupt_fd_);
}

std::unique_ptr<RoundGroup> makeEtcdGroup(const LaunchPlan& plan,
                                          const probes::Environment& parentEnv,
                                          const Notify& notify, EtcdOptions etcd, std::string root,
                                          int storePort, StoreHost* store, EtcdAccess access) {
  return std::make_unique<RoundGroup>(
      notify, std::make_unique<EtcdRounds>(plan, parentEnv, notify, std::move(etcd),
                                           std::move(root), storePort, store, std::move(access)));
}

void EtcdRounds::interrupt() { signalEventFd(interrupt_fd_); }

std::string EtcdRounds::etcdText() const {
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
std::string EtcdRounds::advertisedAddress() const {
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
  if (!loopback) return "";  // no endpoint resolves: enter() says so
  auto outward = probes::outwardRoute();
  if (!outward) return loopback->local_ip;  // no other interface: the job is on this machine alone
  notify_("etcd (" + loopbackHost +
          ") is reached through loopback here: the other machines are told "
          "to reach this one at " +
          probes::describeInterface(*outward) + " (--local_addr names another address)");
  return outward->local_ip;
}

// The first time: a token for this agent, the address the others reach it at, the client; the
// agents spread over etcd's endpoints (each client starts at this agent's own, and goes on to the
// next when it fails), so that one member gone is not every agent's problem at once. Again (the
// others dropped this machine): a new token and a new lease, as far as the others can tell a new
// agent.
Expected<RoundStart> EtcdRounds::enter() {
  if (!client_) {
    me_ = {agentToken(settings_.host), settings_.host, advertisedAddress(), plan_.local_world_size,
           store_port_};
    etcd_.first_endpoint = std::hash<std::string>{}(me_.token);
    try {
      client_ = access_.connect(etcd_);
      store_ = std::make_unique<EtcdStore>(
          etcd_, root_.empty() ? "" : root_.substr(0, root_.size() - 1), access_);
    } catch (const std::exception& e) {
      return makeError("cannot reach " + etcdText() + " (--rdzv_endpoint): " + e.what());
    }
  } else {
    me_.token = agentToken(settings_.host);
  }
  last_ = {};  // a new token: a newcomer to the job's rounds
  return enterJob();
}

// Takes a lease for this agent (its registrations are attached to it) and reads where the job
// is: the round its members opened last, the restarts used. Round 0's connect, and a machine the
// others dropped coming back as a newcomer.
Expected<RoundStart> EtcdRounds::enterJob() {
  try {
    lease_ = std::make_unique<EtcdLease>(
        access_, etcd_, settings_.timeouts, [this](const std::string& why) { onLeaseLost(why); },
        notify_);
    const JobKeys keys = jobKeys();
    // A machine arriving while the job runs joins the round the members opened last.
    auto open = client_->get(keys.openRound());
    auto restarts = client_->get(keys.restarts());
    const RoundStart next{open ? storedInt(open->key, open->value) : 0,
                          restarts ? storedInt(restarts->key, restarts->value) : 0, 0};
    if (open && next.round > 0) noteRunningRound(next.round - 1);
    return next;
  } catch (const NetworkError& e) {
    return makeError("cannot reach " + etcdText() + " (--rdzv_endpoint): " + e.what());
  } catch (const std::exception& e) {
    return makeError(etcdText() + " (--rdzv_endpoint), job '" + settings_.run_id +
                     "': " + e.what());
  }
}

// A machine that comes while the job runs round `running` waits for a later one: said at once,
// as the spare it is when the group is full (else the group re-forms to take it).
void EtcdRounds::noteRunningRound(int running) {
  const RoundKeys keys = jobKeys().round(running);
  const int64_t registered = client_->countPrefix(keys.memberPrefix());
  const int machines = static_cast<int>(std::min<int64_t>(registered, plan_.num_machines));
  if (machines > 0) notify_(spareNotice(running, machines, plan_.num_machines));
}

void EtcdRounds::onLeaseLost(const std::string& why) {
  std::lock_guard lock(link_mutex_);
  if (link_) link_->leaseLost(why);
}

// The job's settings, and where on etcd and under which lease this agent meets now.
EtcdMeeting EtcdRounds::meeting() const {
  EtcdMeeting m;
  m.job = settings_;
  m.job.progress = [this](const std::string& status) { notify_("rendezvous: " + status); };
  m.root = root_;
  m.lease = lease_ ? lease_->id() : 0;
  m.cancel_fd = interrupt_fd_;
  return m;
}

Expected<RendezvousResult> EtcdRounds::join(const RoundStart& start) {
  Expected<EtcdRound> r = makeError("");
  me_.previous_rank = last_.round == start.round - 1 ? last_.machine_rank : -1;
  try {
    r = meetOnEtcd(*client_, meeting(), start, me_);
  } catch (const std::exception& e) {
    return makeError("cannot reach " + etcdText() + ": " + e.what());
  }
  if (!r) return std::move(r).takeError();
  last_ = {start.round, r->machine_rank, r->places, r->seen_at};
  return asRendezvousResult(*r);
}

Expected<RoundLink*> EtcdRounds::watch(const RoundStart& start, const RendezvousResult& joined) {
  EtcdLinkOptions o;
  o.etcd = etcd_;
  o.connect = access_.connect;
  o.meeting = meeting();
  o.round = start.round;
  o.machine_rank = joined.machine_rank;
  o.machines = joined.size;
  o.places = last_.places;
  o.seen_at = last_.seen_at;
  o.window = lease_->ttl();
  // The lease is replaced (enterJob) only once this link is stopped (RoundGroup::meet).
  o.answered = [lease = lease_.get()](const std::string& endpoint) {
    return lease->answeredBy(endpoint);
  };
  try {
    const JobKeys keys = jobKeys();
    client_->put(keys.round(start.round).started(joined.machine_rank), "1");
    client_->put(keys.openRound(), std::to_string(start.round + 1));
    client_->put(keys.restarts(), std::to_string(start.restart_count));
    auto link = std::make_unique<EtcdLink>(o);
    std::lock_guard lock(link_mutex_);
    link_ = std::move(link);
    if (auto lost = lease_->lost()) link_->leaseLost(*lost);
    return static_cast<RoundLink*>(link_.get());
  } catch (const std::exception& e) {
    return makeError("cannot reach " + etcdText() + ": " + e.what());
  }
}

Placement EtcdRounds::placementOf(const RendezvousResult& r) const {
  const MachineInfo& zero = r.machines.front();
  Placement p = staticPlacement(plan_, zero.store_port);
  p.master_addr = zero.address.empty() ? "127.0.0.1" : zero.address;
  p.master_port = zero.store_port;
  p.machine_rank = r.machine_rank;
  p.rank_offset = r.rank_offset;
  p.world_size = r.world_size;
  p.num_machines = r.size;
  p.restart_count = r.restart_count;
  auto route = probes::routeTo(r.machine_rank == 0 && r.machines.size() > 1 ? r.machines[1].address
                                                                            : p.master_addr);
  p.socket_interface = chooseSocketInterface(
      parent_env_, route && !route->interface.empty() ? route->interface : "");
  return p;
}

// The round's record as every backend's: a spare (not in it) learns the round's size, and the
// restart count its next try starts from.
RendezvousResult EtcdRounds::asRendezvousResult(const EtcdRound& r) const {
  RendezvousResult rr;
  rr.closed = r.closed;
  rr.restart_count = r.restart_count;
  rr.max_restarts = plan_.max_restarts;
  if (r.machine_rank < 0) {
    rr.spare = true;
    rr.round_size = r.size;
    return rr;
  }
  rr.machine_rank = r.machine_rank;
  rr.rank_offset = r.rank_offset;
  rr.world_size = r.world_size;
  rr.size = r.size;
  int offset = 0;
  for (size_t m = 0; m < r.members.size(); ++m) {
    const auto& e = r.members[m];
    rr.machines.push_back({e.host, e.token, e.address, e.local_world_size, static_cast<int>(m),
                           offset, e.store_port});
    offset += e.local_world_size;
  }
  return rr;
}

Standing EtcdRounds::standing(const std::optional<RendezvousResult>& joined) const {
  if (!store_ || !lease_) return {Standing::Kind::kCutOff, ""};
  if (auto lost = lease_->lost()) return {Standing::Kind::kDropped, *lost};
  std::lock_guard lock(link_mutex_);
  if (!link_ || !joined) return {};
  for (const auto& m : link_->lostMachines()) {
    if (m.machine == joined->machine_rank)
      return {Standing::Kind::kDropped, "the others found it lost"};
  }
  return {};
}

// Those not in the round before mark their registration (RoundKeys::newcomer): counted, not read.
int EtcdRounds::waiting(int round, const RendezvousResult&) const {
  try {
    return static_cast<int>(client_->countPrefix(jobKeys().round(round).newcomerPrefix()));
  } catch (const std::exception&) {
    return 0;  // etcd unreachable: the lease tells, and the next round does not wait for anyone
  }
}

void EtcdRounds::closeJob(int round, const std::string& why) {
  if (!client_) return;
  job_over_ = true;
  try {
    closeEtcdRound(*client_, meeting(), round, why);
  } catch (const std::exception&) {
  }
}

// The link stays (stopped) for its lost machines until the next round replaces it.
void EtcdRounds::stopLink() {
  std::lock_guard lock(link_mutex_);
  if (link_) link_->stop();
}

// Any member's registration still there but this one's.
bool EtcdRounds::othersGone(int round) const {
  try {
    return client_->countPrefix(jobKeys().round(round).memberPrefix()) <= 1;
  } catch (const std::exception&) {
    return true;
  }
}

void EtcdRounds::afterLeaving(bool host, bool) {
  if (host && job_over_) removeJob();
}

// Machine 0, the last to leave a job that ended everywhere: the job's keys go (the spares waiting
// for a later round heard its end through their watches when closeJob put it), so that the same
// command, run again with the same --rdzv_id, is a new job and not one that "ended before this
// machine could join it".
void EtcdRounds::removeJob() {
  try {
    client_->deletePrefix(jobKeys().prefix());
  } catch (const std::exception& e) {
    notify_("could not remove the job's keys from " + etcdText() + " (" + e.what() +
            "): a job run again with --rdzv_id " + settings_.run_id + " would find it ended");
  }
}

}  // namespace accel::launcher
