#include "launcher/rendezvous/etcd/meeting.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "launcher/base/text.h"
#include "launcher/rendezvous/round/closing.h"

namespace accel::launcher {
namespace {

using json = nlohmann::json;
using time_point = Clock::time_point;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return fd >= 0 && ::poll(&p, 1, 0) > 0;
}

json toJson(const EtcdMember& m) {
  return {{"token", m.token},
          {"host", m.host},
          {"address", m.address},
          {"local_world_size", m.local_world_size},
          {"store_port", m.store_port}};
}

// A registration or a record's member; throws accel::Error naming `key` when it is not one.
EtcdMember memberFrom(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains("token") || !j["token"].is_string()) {
    throw Error("etcd key " + key + " holds no accel agent's registration: " +
                j.dump().substr(0, 200) + " (another program writes under this --rdzv_id?)");
  }
  return {j["token"], j.value("host", ""), j.value("address", ""), j.value("local_world_size", 1),
          j.value("store_port", 0)};
}

// One agent's part in one round's meeting (etcd/meeting.h): what it knows of the round — the
// registrations by token with their create revisions, the record once there is one — as of
// revision_, kept current by one watch.
class Meeting {
 public:
  Meeting(EtcdApi& client, const EtcdMeeting& meeting, const RoundStart& start,
          const EtcdMember& me)
      : client_(client),
        m_(meeting),
        s_(meeting.job),
        clock_(*s_.clock),
        round_(start.round),
        restart_count_(start.restart_count),
        me_(me),
        keys_(etcdRoundKeys(meeting, start.round)),
        round_prefix_(keys_.prefix()),
        member_prefix_(keys_.memberPrefix()),
        record_key_(keys_.record()),
        closing_(s_.leastMachines(), s_.num_machines, start.expect_machines,
                 s_.timeouts.last_call) {}

  Expected<EtcdRound> run() {
    json registration = toJson(me_);
    registration["restart_count"] = restart_count_;
    client_.put(keys_.member(me_.token), registration.dump(), m_.lease);
    const time_point joinBy = clock_.now() + s_.timeouts.join;
    before_ = previousRanks();
    read();
    next_progress_ = clock_.now() + s_.timeouts.progress;
    while (!record_) {
      const time_point now = clock_.now();
      const int taken = placesTaken();
      const bool ready = closing_.ready(taken, now);
      if (ready && !previousMembersDecide()) {
        close();
        continue;
      }
      // Once MIN joined, the round closes at the last call, whatever the join timeout.
      if (now >= joinBy && !closing_.lastCallEnd()) return timedOut();
      if (readable(m_.cancel_fd)) {
        return makeError("round " + std::to_string(round_) + ": interrupted while it formed");
      }
      if (ready) {
        awaitPreviousMembers();
      } else {
        sayProgress(taken, now, joinBy);
        awaitChanges(std::min(closing_.lastCallEnd().value_or(joinBy), next_progress_));
      }
    }
    return resultOf(*record_);
  }

 private:
  // Every timeouts.progress while the round forms: how many, and what it waits for.
  void sayProgress(int taken, time_point now, time_point joinBy) {
    if (!s_.progress || now < next_progress_) return;
    next_progress_ = now + s_.timeouts.progress;
    const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d); };
    std::optional<std::chrono::milliseconds> lastCallLeft;
    if (auto end = closing_.lastCallEnd()) lastCallLeft = ms(*end - now);
    s_.progress(
        "round " + std::to_string(round_) + ": " +
        formingText(taken, closing_.least(), closing_.most(), lastCallLeft, ms(joinBy - now)));
  }

  // How many of the round's places its registrants take now, as the closing rule counts them:
  // every survivor of the round before that registered; the others only for the places the
  // survivors still alive (registered in the round before) leave free — so that spares that came
  // first do not close the round before the survivors are in, taking their places.
  int placesTaken() const {
    int survivors = 0;
    for (const auto& [token, r] : registered_) survivors += before_.count(token) ? 1 : 0;
    const int others = static_cast<int>(registered_.size()) - survivors;
    if (others == 0 || before_.empty()) return static_cast<int>(registered_.size());
    int alive = 0;
    const RoundKeys previous = etcdRoundKeys(m_, round_ - 1);
    for (const auto& kv : client_.getPrefix(previous.memberPrefix())) {
      alive += before_.count(kv.key.substr(previous.memberPrefix().size())) ? 1 : 0;
    }
    return survivors + std::min(others, std::max(0, s_.num_machines - alive));
  }

  // Whether this round is the round before's members' to close: it formed, this agent was not
  // one of them (a spare, or a newcomer), and one of them is still registered there (its agent
  // alive). A spare that closed it at MIN and the last call would train beside the running group
  // (a second group, writing the same checkpoints), or take the places of its survivors while
  // they decide. So it waits: the members re-form here (they stopped for a failure, a loss or
  // this arrival) and take it, by the rule of their decision; the job's end closes the round for
  // it; or, their agents all gone, it may close the round itself.
  bool previousMembersDecide() const {
    if (before_.empty() || before_.count(me_.token)) return false;
    const RoundKeys previous = etcdRoundKeys(m_, round_ - 1);
    for (const auto& kv : client_.getPrefix(previous.memberPrefix())) {
      if (before_.count(kv.key.substr(previous.memberPrefix().size()))) return true;
    }
    return false;
  }

  // While the round before's members decide: waits until one of their registrations goes, this
  // round's keys change, the agent is told to stop, or keep_alive_interval passed (then it looks
  // again: a watch's endpoint may have gone silent).
  void awaitPreviousMembers() {
    try {
      ensureWatch();
      if (!held_members_) {
        const RoundKeys before = etcdRoundKeys(m_, round_ - 1);
        held_members_ = client_.watch(before.memberPrefix(), true, revision_ + 1,
                                      clock_.now() + client_.timeout());
      }
      if (drainWatch()) return;
      waitReadable(clock_, {held_members_->fd(), watch_->fd(), m_.cancel_fd},
                   clock_.now() + s_.timeouts.keep_alive_interval);
      // previousMembersDecide() reads what they say afresh; the events only wake this agent.
      while (!held_members_->next(clock_.now()).empty()) {
      }
      drainWatch();
    } catch (const NetworkError&) {
      held_members_.reset(), watch_.reset();
      read();
    }
  }

  // The watch of the round's keys, opened (again) from the last revision read.
  void ensureWatch() {
    if (watch_) return;
    ++watches_;
    watch_ = client_.watch(round_prefix_, true, revision_ + 1, clock_.now() + client_.timeout());
    watched_at_ = client_.pinned(s_.timeouts.keep_alive_interval);
    heard_ = clock_.now();
  }

  // The round's keys at one revision (the client fails over between endpoints).
  void read() {
    registered_.clear();
    for (const auto& kv : client_.getPrefix(round_prefix_)) apply(kv, false);
    revision_ = std::max(revision_, client_.revision());
  }

  void apply(const EtcdKeyValue& kv, bool deleted) {
    revision_ = std::max(revision_, kv.mod_revision);
    if (kv.key == record_key_) {
      if (!deleted) record_ = kv;
    } else if (kv.key.rfind(member_prefix_, 0) == 0) {
      const std::string token = kv.key.substr(member_prefix_.size());
      if (deleted) {
        registered_.erase(token);  // its lease expired, or it was revoked: the agent left
      } else {
        const json j = json::parse(kv.value, nullptr, false);
        registered_[token] = {kv.create_revision, memberFrom(j, kv.key),
                              j.is_object() ? j.value("restart_count", 0) : 0};
      }
    }
  }

  // Waits for the round's next changes until `deadline` (or the watch's endpoint is to be asked
  // whether it serves, or the agent is told to stop); a watch whose endpoint went away is replaced
  // after a fresh read (on whichever endpoint answers then).
  void awaitChanges(time_point deadline) {
    try {
      ensureWatch();
      if (clock_.now() - heard_ >= s_.timeouts.keep_alive_interval) checkWatchedEndpoint();
      // What the watch holds already (a message read with an earlier one) is not on its
      // descriptor: taken first, and after every wait.
      if (drainWatch()) return;
      if (awaitWatchOrCancel(std::min(deadline, heard_ + s_.timeouts.keep_alive_interval))) {
        drainWatch();
      }
    } catch (const NetworkError&) {
      watch_.reset();
      read();
    }
  }
  // Applies every event the watch has now; whether there was any.
  bool drainWatch() {
    bool any = false;
    for (auto events = watch_->next(clock_.now()); !events.empty();
         events = watch_->next(clock_.now())) {
      for (const auto& e : events) apply(e.kv, e.deleted);
      heard_ = clock_.now();
      any = true;
    }
    return any;
  }
  // Whether the watch or the cancel descriptor became readable by `deadline`.
  bool awaitWatchOrCancel(time_point deadline) {
    const int n = waitReadable(clock_, {watch_->fd(), m_.cancel_fd}, deadline);
    if (n < 0) throw Error(std::string("epoll_create1: ") + std::strerror(errno));
    return n > 0;
  }
  // The watch's endpoint answers a quorum read (the record's key), or NetworkError.
  void checkWatchedEndpoint() {
    try {
      watched_at_->get(record_key_);
    } catch (const Error& e) {
      throw NetworkError(e.what());
    }
    heard_ = clock_.now();
  }

  // The record of the round as this agent sees it complete, created unless another agent's
  // came first (then that one is the round's): the members ranked by rankMembers
  // (round/closing.h), and the highest restart count a registrant brought — a spare knows the
  // count of the round it waited through, the survivors the one they decided since, whichever of
  // them closes the round.
  void close() {
    std::vector<Registrant> registrants;
    std::vector<const Registration*> of;
    int restartCount = restart_count_;
    for (const auto& [token, r] : registered_) {
      registrants.push_back({token, r.arrival, false});
      of.push_back(&r);
      restartCount = std::max(restartCount, r.restart_count);
    }
    json members = json::array();
    for (size_t i : rankMembers(registrants, before_, s_.num_machines)) {
      members.push_back(toJson(of[i]->member));
    }
    const std::string value =
        json{{"round", round_}, {"restart_count", restartCount}, {"members", members}}.dump();
    if (client_.create(record_key_, value)) {
      record_ = EtcdKeyValue{record_key_, value, client_.revision(), client_.revision(), 1, 0};
    } else {
      record_ = client_.get(record_key_);
    }
  }

  // The machine ranks of the round before, by token (none in round 0, or when it never formed).
  std::map<std::string, int> previousRanks() const {
    if (round_ == 0) return {};
    auto record = client_.get(etcdRoundKeys(m_, round_ - 1).record());
    if (!record) return {};
    const json j = json::parse(record->value, nullptr, false);
    return j.is_object() && j.contains("members") ? ranksByToken(j["members"])
                                                  : std::map<std::string, int>{};
  }

  EtcdRound resultOf(const EtcdKeyValue& record) const {
    const json j = json::parse(record.value, nullptr, false);
    if (!j.is_object() || !j.contains("members") || !j["members"].is_array()) {
      throw Error("etcd key " + record.key +
                  " holds no round record: " + record.value.substr(0, 200));
    }
    EtcdRound r;
    r.closed_at = record.mod_revision;
    r.restart_count = j.value("restart_count", 0);
    r.closed = j.value("closed", "");
    r.watches = watches_;
    for (const auto& m : j["members"]) {
      r.members.push_back(memberFrom(m, record.key));
      if (r.members.back().token == me_.token) {
        r.machine_rank = static_cast<int>(r.members.size()) - 1;
        r.rank_offset = r.world_size;
      }
      r.world_size += r.members.back().local_world_size;
    }
    return r;
  }

  Expected<EtcdRound> timedOut() const {
    std::string hosts;
    for (const auto& [token, r] : registered_) hosts += (hosts.empty() ? "" : ", ") + r.member.host;
    return makeError("round " + std::to_string(round_) + " on etcd at " + client_.endpointInUse() +
                     ": " + std::to_string(registered_.size()) + " of " +
                     std::to_string(s_.leastMachines()) + " machines joined within " +
                     secondsText(s_.timeouts.join) + (hosts.empty() ? "" : " (" + hosts + ")"));
  }

  EtcdApi& client_;
  const EtcdMeeting& m_;
  const GroupSettings& s_;  // m_.job
  Clock& clock_;
  const int round_;
  const int restart_count_;
  const EtcdMember& me_;
  const RoundKeys keys_;
  const std::string round_prefix_, member_prefix_, record_key_;
  struct Registration {
    int64_t arrival = 0;  // its key's create revision
    EtcdMember member;
    int restart_count = 0;  // what its agent knew when it registered
  };
  std::map<std::string, Registration> registered_;  // by token
  std::map<std::string, int> before_;               // the round before's machine ranks, by token
  std::optional<EtcdKeyValue> record_;
  RoundClosing closing_;      // when the round may close (round_closing.h)
  time_point next_progress_;  // when sayProgress next speaks
  int64_t revision_ = 0;
  std::unique_ptr<EtcdWatchStream> watch_;
  // While the round before's members decide: a watch of their registrations.
  std::unique_ptr<EtcdWatchStream> held_members_;
  std::unique_ptr<EtcdApi> watched_at_;  // a client of watch_'s endpoint alone
  time_point heard_;  // when it brought something last (or its endpoint answered)
  int watches_ = 0;
};

}  // namespace

RoundKeys etcdRoundKeys(const EtcdMeeting& meeting, int round) {
  return JobKeys(meeting.job.run_id, meeting.root).round(round);
}

void closeEtcdRound(EtcdApi& client, const EtcdMeeting& meeting, int round,
                    const std::string& why) {
  client.create(etcdRoundKeys(meeting, round).record(),
                json{{"round", round}, {"closed", why}, {"members", json::array()}}.dump());
}

Expected<EtcdRound> meetOnEtcd(EtcdApi& client, const EtcdMeeting& meeting, const RoundStart& start,
                               const EtcdMember& me) {
  return Meeting(client, meeting, start, me).run();
}

}  // namespace accel::launcher
