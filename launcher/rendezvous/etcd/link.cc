#include "launcher/rendezvous/etcd/link.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "accel/error.h"

namespace accel::launcher {

namespace {

// How a member is lost on etcd, in the summary's list of lost machines.
constexpr const char* kLeaseEnded = "its lease ended";

// The link's calls are small and a healthy etcd answers them at once: each is bounded by
// etcd_link_call in all (etcd_link_try an endpoint), so that stop() never waits longer for a call
// in progress when etcd is gone (the lease says when that ends the job).
EtcdOptions linkBounds(EtcdOptions o, const RoundTimeouts& t) {
  o.timeout = std::min(o.timeout, t.etcd_link_call);
  o.attempt_timeout = std::min(o.attempt_timeout, t.etcd_link_try);
  return o;
}

}  // namespace

EtcdLink::EtcdLink(EtcdLinkOptions options)
    : o_(std::move(options)),
      clock_(*o_.meeting.job.clock),
      client_(o_.connect(linkBounds(o_.etcd, o_.meeting.job.timeouts))),
      keys_(etcdRoundKeys(o_.meeting, o_.round)),
      next_keys_(etcdRoundKeys(o_.meeting, o_.round + 1)),
      liveness_(o_.machines, o_.meeting.job.num_machines, o_.machine_rank, o_.meeting.job.timeouts,
                clock_.now()) {
  readRound();
  openWatches();
  thread_ = clock_.startThread([this] { run(); });  // signals are the supervisor's
}

EtcdLink::~EtcdLink() { stop(); }

// The watches close with the thread: a stopped link lives on until the next round replaces it,
// and its watch of the next round's registrations would bring every agent every arrival while
// the group re-forms (N events per agent).
void EtcdLink::stop() {
  mailbox_.requestStop();
  if (thread_.joinable()) clock_.joinThread(thread_);
  watches_.clear();
}

// Posted from the caller's thread (the lease's), not the link's: that one may be in an etcd call
// that takes its whole bound while etcd is gone.
void EtcdLink::leaseLost(const std::string& why) {
  {
    std::lock_guard lock(lease_mutex_);
    if (lease_lost_) return;
    lease_lost_ = true;
  }
  JobFailure lost;
  lost.machine_rank = o_.machine_rank;
  lost.reason = why;
  mailbox_.post(LinkEvent::of(LinkEvent::Kind::kRemoteFailure, std::move(lost)));
}

// Until stopped: what the watches saw, a publication to make; then a wait for the next of them (a
// watch to open again is tried every etcd_watch_retry).
void EtcdLink::run() {
  while (true) {
    if (!drainWatches()) reconnect();
    if (!watches_.empty() && clock_.now() >= next_check_ && !watchEndpointServes()) {
      client_->passOver(watch_check_->endpointInUse());  // not the silent one's attempt again
      watches_.clear();
      reconnect();
    }
    auto [mine, status, stopping, regroup] = mailbox_.take();
    if (stopping) return;
    if (mine) onPublish(*mine);
    if (regroup && !change_published_) {
      change_published_ = true;
      publishStop(*regroup);
    }
    if (status) onShare(*status);
    waitForWork();
  }
}

// Every message the watches hold now; false when one ended (its endpoint gone). A watch that
// etcd ended because its history was compacted past the revision it started from makes the next
// reconnect read the members afresh.
bool EtcdLink::drainWatches() {
  if (watches_.empty()) return false;
  try {
    for (auto& w : watches_) {
      while (true) {
        auto events = w.watch->next(clock_.now());
        if (events.empty()) break;
        for (const auto& e : events) {
          onEvent(e, w.what);
          seen_[static_cast<int>(w.what)] =
              std::max(seen_[static_cast<int>(w.what)], e.kv.mod_revision);
        }
      }
    }
    return true;
  } catch (const Error& e) {
    compacted_ = compacted_ || std::string(e.what()).find("compact") != std::string::npos;
    watches_.clear();
    return false;
  }
}

// Until the mailbox or a watch has something, or the next check of the watches' endpoint is due
// (a watch to open again: etcd_watch_retry).
void EtcdLink::waitForWork() {
  std::vector<int> fds{mailbox_.wakeFd()};
  for (const auto& w : watches_) fds.push_back(w.watch->fd());
  const auto deadline =
      watches_.empty() ? clock_.now() + o_.meeting.job.timeouts.etcd_watch_retry : next_check_;
  waitReadable(clock_, fds, deadline);
}

// Whether the watches' endpoint answers a read that needs quorum (a linearizable range of the
// stop record) within the keep-alive interval (each check at most etcd_link_try): a machine cut off
// keeps its connections silent, and a member cut off from the others' majority serves no such read.
bool EtcdLink::watchEndpointServes() {
  const auto now = clock_.now();
  const auto interval = o_.meeting.job.timeouts.keep_alive_interval;
  next_check_ = now + interval;
  if (o_.answered) {  // the lease's renewals went there: no question of its own
    const auto at = o_.answered(watch_check_->endpointInUse());
    if (at && now - *at < interval) return true;
  }
  try {
    watch_check_->get(keys_.stop());
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The watches again, after a read that catches up on what happened meanwhile.
void EtcdLink::reconnect() {
  try {
    readRound();
    openWatches();
  } catch (const Error& e) {
    watches_.clear();  // etcd unreachable: the lease says when that is the job's end
    compacted_ = compacted_ || std::string(e.what()).find("compact") != std::string::npos;
  }
}

// Between two calls, a stop requested meanwhile ends the read (stop() waits for one call at most).
// The members are not read: their watch starts where the round's record was made (seen_at), or
// where it brought its last event. Only after etcd compacted that history away are they read:
// every registration, and the places of those gone.
void EtcdLink::readRound() {
  auto stopping = [this] {
    if (mailbox_.stopping()) throw Error("the link is stopping");
  };
  if (seen_[0] == 0) {
    const int64_t from = o_.seen_at > 0 ? o_.seen_at : client_->revision();
    for (auto& seen : seen_) seen = from;
  }
  if (compacted_) readMembers();
  stopping();
  if (auto stop = client_->get(keys_.stop())) onStop(stop->value);
  stopping();
  if (seen_[0] == 0) {
    for (auto& seen : seen_) seen = client_->revision();
  }
  if (client_->countPrefix(next_keys_.memberPrefix()) > 0) onArrival();
}

// After a compaction: every member whose registration is not there now is gone (found in the
// places, chunk by chunk), and the watches start from now.
void EtcdLink::readMembers() {
  std::set<std::string> present;
  for (const auto& kv : client_->getPrefix(keys_.memberPrefix())) {
    present.insert(kv.key.substr(keys_.memberPrefix().size()));
  }
  const int64_t now = client_->revision();
  for (const auto& chunk : client_->getPrefix(o_.places)) {
    const auto places = nlohmann::json::parse(chunk.value, nullptr, false);
    if (!places.is_array()) continue;
    for (const auto& p : places) {
      if (!p.is_object() || present.count(p.value("token", ""))) continue;
      const std::string key = keys_.member(p.value("token", ""));
      members_[key] = {p.value("rank", -1), p.value("host", "")};
      onMemberGone(EtcdKeyValue{key, "", 0, 0, 0, 0});
    }
  }
  for (auto& seen : seen_) seen = now;
  compacted_ = false;
}

void EtcdLink::openWatches() {
  const auto deadline = clock_.now() + client_->timeout();
  const auto from = [this](Watched w) { return seen_[static_cast<int>(w)] + 1; };
  watches_.clear();
  watches_.push_back(
      {Watched::kStop, client_->watch(keys_.stop(), false, from(Watched::kStop), deadline)});
  watches_.push_back({Watched::kMembers, client_->watch(keys_.memberPrefix(), true,
                                                        from(Watched::kMembers), deadline)});
  watches_.push_back({Watched::kArrivals, client_->watch(next_keys_.memberPrefix(), true,
                                                         from(Watched::kArrivals), deadline)});
  watch_check_ = client_->pinned(
      std::min(o_.meeting.job.timeouts.keep_alive_interval, o_.meeting.job.timeouts.etcd_link_try));
  next_check_ = clock_.now() + o_.meeting.job.timeouts.keep_alive_interval;
}

void EtcdLink::onEvent(const EtcdEvent& e, Watched what) {
  if (what == Watched::kStop && !e.deleted) onStop(e.kv.value);
  if (what == Watched::kMembers && e.deleted) onMemberGone(e.prev.key.empty() ? e.kv : e.prev);
  if (what == Watched::kArrivals && !e.deleted) onArrival();
}

// The round's stop record, once: another machine's failure, a lost machine (this one's
// publication included), or the group growing. This machine's own failure was posted when it
// was published.
void EtcdLink::onStop(const std::string& value) {
  if (stop_heard_) return;
  std::optional<RoundStop> first;
  try {
    first = decodeRoundStop(value);
  } catch (const std::exception&) {
    return;
  }
  stop_heard_ = true;
  // A member lost, as another link saw it first: lost here too before the event is told (this
  // link's own watch may bring the registration's end a moment later), so the round's end that
  // the event starts counts it at once.
  if (first->failure && first->failure->cause == kCauseLost) markLost(first->failure->machine_rank);
  mailbox_.post(LinkEvent::heard(std::move(*first), LinkEvent::Kind::kRemoteFailure));
}

// Member `machine` lost (its lease ended), as another link or this agent's own lease found:
// once; false when it was known already.
bool EtcdLink::markLost(int machine) {
  if (machine == o_.machine_rank) {
    if (self_lost_) return false;
    self_lost_ = true;
  } else if (!liveness_.lostElsewhere(machine)) {
    return false;
  }
  mailbox_.addLost({machine, kLeaseEnded});
  return true;
}

// The member whose registration `registration` was (its key, value and create revision as they
// were): found once in the round's places (etcd/meeting.h), then known.
EtcdLink::Member EtcdLink::memberOf(const EtcdKeyValue& registration) {
  auto known = members_.find(registration.key);
  if (known != members_.end()) return known->second;
  Member m;
  if (!o_.places.empty() && !registration.value.empty()) {
    try {
      if (auto place = findEtcdPlace(*client_, o_.places, registration)) {
        m = {place->machine_rank, place->member.host};
      }
    } catch (const NetworkError&) {
      throw;  // the watch brings the event again once the link reconnected
    } catch (const Error&) {
      // Not an agent's registration (another program's key under the round): no member's.
    }
  }
  members_[registration.key] = m;
  return m;
}

// A member's registration went with its lease: Liveness judges it lost, unless it said it
// finished first (left). One that never said it started was never part of the work.
void EtcdLink::onMemberGone(const EtcdKeyValue& registration) {
  const Member member = memberOf(registration);
  const int machine = member.machine;
  if (machine < 0) return;
  if (machine == o_.machine_rank) {  // this agent's own: dropped (its lease says why)
    markLost(machine);
    return;
  }
  bool started = true;
  const auto change = liveness_.gone(machine, kLeaseEnded, [&] {
    try {
      if (client_->get(keys_.finished(machine))) return true;
      started = client_->get(keys_.started(machine)).has_value();
    } catch (const Error&) {
    }
    return false;
  });
  if (!change || change->kind != GroupChange::Kind::kLost) return;
  mailbox_.addLost(change->lost());
  if (!started) return neverStarted(machine, member.host);
  change_published_ = true;
  // etcd deletes a lease's keys alike when it expires and when it is revoked (etcd 3.4 before
  // 3.4.31 and 3.5 before 3.5.13 revoke live leases when a leader that stalled resumes:
  // etcd-io/etcd#15247), and the watch cannot tell which: say both. The watch brings the record
  // back, to every link alike.
  publishStop(RoundStop::failed(lostFailure(change->lost(), member.host,
                                            "no keep-alive reached etcd for " +
                                                std::to_string(o_.window.count()) +
                                                " s, or etcd revoked it")));
}

// Member `machine`'s agent died between its registration and the round's close (it never said it
// took its place): etcd could not tell it from a living one until its lease ended. It was never
// part of the job's work, so the group re-forms without it as for a machine joining — no
// failure, no restart counted (on the master's store such a registration never becomes a
// member: its presence is seen at once).
void EtcdLink::neverStarted(int machine, const std::string& host) {
  change_published_ = true;
  publishStop(RoundStop::growing("machine " + std::to_string(machine) + " (" + host +
                                 ") was gone before the round started (its agent died after it "
                                 "registered): the group re-forms without it"));
}

// A machine registered for the next round while the group has room: re-form to take it.
void EtcdLink::onArrival() {
  if (change_published_) return;
  const auto change = liveness_.arrivals(1);  // nullopt when the group is full: a spare
  if (!change) return;
  change_published_ = true;
  publishStop(RoundStop::growing(change->how));
}

void EtcdLink::onPublish(const JobFailure& mine) {
  auto first = publishStop(RoundStop::failed(mine));
  stop_heard_ = true;
  mailbox_.postPublished(mine, std::move(first));
}

void EtcdLink::onShare(const std::string& json) {
  try {
    client_->put(JobKeys(o_.meeting.job.run_id, o_.meeting.root).status(o_.machine_rank), json,
                 o_.meeting.lease);
  } catch (const Error&) {
    // Best effort: etcd gone for the window shows as the lease lost.
  }
}

// The round's stop record, created unless there is one: nullopt when this one stands (or etcd
// could not be reached: the lease tells), else the one that was first.
std::optional<RoundStop> EtcdLink::publishStop(const RoundStop& stop) {
  try {
    if (client_->create(keys_.stop(), encodeRoundStop(stop))) return std::nullopt;
    if (auto stored = client_->get(keys_.stop())) return decodeRoundStop(stored->value);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace accel::launcher
