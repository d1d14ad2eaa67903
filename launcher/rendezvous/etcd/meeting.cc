#include "launcher/rendezvous/etcd/meeting.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

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
  return {{"token", m.token},           {"host", m.host},
          {"address", m.address},       {"local_world_size", m.local_world_size},
          {"store_port", m.store_port}, {"previous_rank", m.previous_rank}};
}

// A registration or a record's member; throws accel::Error naming `key` when it is not one.
EtcdMember memberFrom(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains("token") || !j["token"].is_string()) {
    throw Error("etcd key " + key + " holds no accel agent's registration: " +
                j.dump().substr(0, 200) + " (another program writes under this --rdzv_id?)");
  }
  return {j["token"],
          j.value("host", ""),
          j.value("address", ""),
          j.value("local_world_size", 1),
          j.value("store_port", 0),
          j.value("previous_rank", -1)};
}

// A member's order among the round's (etcd/meeting.h): a survivor by its rank in the round
// before, the others by arrival; chunks of places are named by their last member's, so that a
// member's chunk is the first at or after its own order (found in etcd's index).
std::string orderKey(int previousRank, int64_t arrival) {
  char text[32];
  if (previousRank >= 0) {
    std::snprintf(text, sizeof text, "0/%010d", previousRank);
  } else {
    std::snprintf(text, sizeof text, "1/%020lld", static_cast<long long>(arrival));
  }
  return text;
}

json placeJson(const EtcdMember& m, int rank, int offset) {
  json j = toJson(m);
  j["rank"] = rank;
  j["offset"] = offset;
  return j;
}

std::optional<EtcdPlace> placeIn(const EtcdKeyValue& chunk, const std::string& token) {
  const json places = json::parse(chunk.value, nullptr, false);
  if (!places.is_array()) {
    throw Error("etcd key " + chunk.key +
                " holds no round's places: " + chunk.value.substr(0, 200));
  }
  for (const auto& p : places) {
    if (p.is_object() && p.value("token", "") == token) {
      return EtcdPlace{p.value("rank", -1), p.value("offset", 0), memberFrom(p, chunk.key)};
    }
  }
  return std::nullopt;
}

// One agent's part in one round's meeting (etcd/meeting.h). A follower watches the record's keys
// (the record, the head's key); the head knows every registration (by token, with its create
// revision) and the record once there is one, as of revision_, kept current by one watch of the
// round's keys.
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
        expect_machines_(start.expect_machines),
        me_(me),
        keys_(etcdRoundKeys(meeting, start.round)),
        round_prefix_(keys_.prefix()),
        member_prefix_(keys_.memberPrefix()),
        record_key_(keys_.record()) {
    closing_.emplace(s_.leastMachines(), s_.num_machines, start.expect_machines,
                     s_.timeouts.last_call);
  }

  Expected<EtcdRound> run() {
    enroll();
    join_by_ = follow_until_ = clock_.now() + s_.timeouts.join;
    next_progress_ = clock_.now() + s_.timeouts.progress;
    while (!record_ && !failed_) {
      if (readable(m_.cancel_fd)) {
        return makeError("round " + std::to_string(round_) + ": interrupted while it formed");
      }
      if (head_) {
        headStep();
      } else {
        followerStep();
      }
    }
    if (failed_) return makeError(*failed_);
    return resultOf(*record_);
  }

 private:
  // The registration (with the restart count and the machines this agent expects: the decision
  // a head that was not in the round before closes it by), a newcomer's mark, and the head's key
  // unless the round has a head or a record already, in one transaction; its arrival, and the
  // record when the round closed before this agent came.
  void enroll() {
    json registration = toJson(me_);
    registration["restart_count"] = restart_count_;
    registration["expect_machines"] = expect_machines_;
    const std::string key = keys_.member(me_.token);
    const std::string value = registration.dump();
    std::vector<std::pair<std::string, std::string>> puts{{key, value}};
    if (me_.previous_rank < 0) puts.emplace_back(keys_.newcomer(me_.token), "");
    // The transaction's revision is the key's creation (one its client tried again is found out
    // by resultOf, which then reads the key).
    const EtcdEnrollment e = client_.enroll(puts, keys_.head(), me_.token, record_key_, m_.lease);
    mine_ = EtcdKeyValue{key, value, e.revision, e.revision, 1, m_.lease};
    revision_ = e.revision;
    if (e.read) record_ = *e.read;
    enrolled_as_head_ = e.created;
  }

  // Whether this agent created the head's key: its enrollment says the first time; after that
  // (the head before it went) it tries again.
  bool createdHead() {
    if (auto told = std::exchange(enrolled_as_head_, std::nullopt)) return *told;
    return client_.create(keys_.head(), me_.token, m_.lease);
  }

  // --- a follower ---

  // Its part decided (the head's key created: the head now), then a wait for the record, the
  // head's going, the next progress notice or the join's end; the record's endpoint asked every
  // keep-alive window whether it still serves (a silent one is left for another).
  void followerStep() {
    try {
      if (!record_watch_ && !follow()) return becomeHead();
      if (drainFollower()) return;
      const time_point now = clock_.now();
      if (now >= follow_until_) return followerJoinEnded(now);
      sayFollowerProgress(now);
      const time_point checkAt =
          heard_ + s_.timeouts.keep_alive_interval * s_.timeouts.keep_alive_misses;
      if (now >= checkAt) return checkRecord();
      const int n = waitReadable(clock_, {record_watch_->fd(), m_.cancel_fd},
                                 std::min({follow_until_, next_progress_, checkAt}));
      if (n < 0) throw Error(std::string("epoll_create1: ") + std::strerror(errno));
    } catch (const NetworkError&) {
      record_watch_.reset();
      if (auto record = client_.get(record_key_)) record_ = *record;
      revision_ = std::max(revision_, client_.revision());
    }
  }

  // The round's head is the agent that creates its key (RoundKeys::head, attached to its lease:
  // it goes with its agent); false when this one did. Else the record's keys — the record and the
  // head's key — watched from the last revision read, so that nothing is missed.
  bool follow() {
    if (createdHead()) return false;
    ++watches_;
    record_watch_ =
        client_.watch(record_key_, true, revision_ + 1, clock_.now() + client_.timeout());
    if (!watched_at_) watched_at_ = client_.pinned(s_.timeouts.keep_alive_interval);
    heard_ = clock_.now();
    return true;
  }

  // What the follower's watch holds now: the record, or the head gone (then the head's key is
  // tried again); whether anything.
  bool drainFollower() {
    bool any = false, gone = false;
    for (auto e = record_watch_->next(clock_.now()); !e.empty();
         e = record_watch_->next(clock_.now())) {
      for (const auto& event : e) {
        revision_ = std::max(revision_, event.kv.mod_revision);
        if (event.kv.key == record_key_ && !event.deleted) record_ = event.kv;
        if (event.kv.key == keys_.head() && event.deleted) gone = true;
      }
      any = true;
    }
    if (gone && !record_) record_watch_.reset();
    if (any) heard_ = clock_.now();
    return any;
  }

  // The record's endpoint answers a quorum read of the record (which the watch may have missed
  // from a member cut off), or NetworkError.
  void checkRecord() {
    ++checks_;
    try {
      if (auto record = watched_at_->get(record_key_)) record_ = *record;
    } catch (const Error& e) {
      throw NetworkError(e.what());
    }
    heard_ = clock_.now();
  }

  // At the join's end: while MIN registered, the head closes the round at its last call (waited
  // for a last call more, and again); else the round did not form.
  void followerJoinEnded(time_point now) {
    if (client_.countPrefix(member_prefix_) >= s_.leastMachines()) {
      follow_until_ = now + s_.timeouts.last_call + s_.timeouts.answer_margin;
      return;
    }
    read();
    failed_ = timedOut();
  }

  // Every timeouts.progress (its time moves on with no one to tell: the waits end there).
  void sayFollowerProgress(time_point now) {
    if (now < next_progress_) return;
    next_progress_ = now + s_.timeouts.progress;
    if (!s_.progress) return;
    const int here = static_cast<int>(client_.countPrefix(member_prefix_));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(join_by_ - now);
    s_.progress("round " + std::to_string(round_) + ": " +
                formingText(std::min(here, s_.num_machines), closing_->least(), closing_->most(),
                            std::nullopt, std::max(left, std::chrono::milliseconds(0))));
  }

  // --- the head ---

  // First in the queue: it reads the round before's members and every registration, and closes
  // the round.
  void becomeHead() {
    head_ = true;
    record_watch_.reset();
    before_ = previousRanks();
    read();
  }

  void headStep() {
    const time_point now = clock_.now();
    adoptSurvivorsRule();
    const int taken = placesTaken();
    const bool ready = closing_->ready(taken, now);
    if (ready && !previousMembersDecide()) return close();
    // Once MIN joined, the round closes at the last call, whatever the join timeout.
    if (now >= join_by_ && !closing_->lastCallEnd()) {
      failed_ = timedOut();
      return;
    }
    if (ready) return awaitPreviousMembers();
    sayProgress(taken, now);
    awaitChanges(std::min(closing_->lastCallEnd().value_or(join_by_), next_progress_));
  }

  // A head that was not in the round before (a newcomer, a spare) closes a round the survivors
  // re-form in by their rule — the machines they expect, as their registration says — once one
  // of them registered: until then the round is theirs to decide (previousMembersDecide).
  void adoptSurvivorsRule() {
    if (adopted_ || before_.empty() || before_.count(me_.token)) return;
    for (const auto& [token, r] : registered_) {
      if (!before_.count(token)) continue;
      adopted_ = true;
      closing_.emplace(s_.leastMachines(), s_.num_machines, r.expect_machines,
                       s_.timeouts.last_call);
      return;
    }
  }

  // Every timeouts.progress while the round forms: how many, and what it waits for (its time
  // moves on with no one to tell: the waits end there).
  void sayProgress(int taken, time_point now) {
    if (now < next_progress_) return;
    next_progress_ = now + s_.timeouts.progress;
    if (!s_.progress) return;
    const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d); };
    std::optional<std::chrono::milliseconds> lastCallLeft;
    if (auto end = closing_->lastCallEnd()) lastCallLeft = ms(*end - now);
    s_.progress(
        "round " + std::to_string(round_) + ": " +
        formingText(taken, closing_->least(), closing_->most(), lastCallLeft, ms(join_by_ - now)));
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
  // one of them (a spare, or a newcomer), none of them registered here yet, and one of them is
  // still registered there (its agent alive). A spare that closed it at MIN and the last call
  // would train beside the running group (a second group, writing the same checkpoints), or take
  // the places of its survivors while they decide. So it waits: the members re-form here (they
  // stopped for a failure, a loss or this arrival) and it closes the round by their rule
  // (adoptSurvivorsRule); the job's end closes the round for it; or, their agents all gone, it
  // closes the round itself.
  bool previousMembersDecide() const {
    if (adopted_ || before_.empty() || before_.count(me_.token)) return false;
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
                              j.is_object() ? j.value("restart_count", 0) : 0,
                              j.is_object() ? j.value("expect_machines", 0) : 0};
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
    ++checks_;
    try {
      watched_at_->get(record_key_);
    } catch (const Error& e) {
      throw NetworkError(e.what());
    }
    heard_ = clock_.now();
  }

  // The record of the round as the head sees it complete, created unless another agent's came
  // first (then that one is the round's): the members ranked by rankMembers (round/closing.h),
  // their places in chunks (written first: the record names them), and the highest restart count
  // a registrant brought — a spare knows the count of the round it waited through, the survivors
  // the one they decided since, whichever of them closes the round.
  void close() {
    std::vector<Registrant> registrants;
    std::vector<const Registration*> of;
    int restartCount = restart_count_;
    for (const auto& [token, r] : registered_) {
      registrants.push_back({token, r.arrival, false});
      of.push_back(&r);
      restartCount = std::max(restartCount, r.restart_count);
    }
    std::vector<EtcdMember> members;
    std::vector<int64_t> arrivals;
    for (size_t i : rankMembers(registrants, before_, s_.num_machines)) {
      members.push_back(of[i]->member);
      const auto survivor = before_.find(registrants[i].token);
      members.back().previous_rank = survivor == before_.end() ? -1 : survivor->second;
      arrivals.push_back(of[i]->arrival);
    }
    const std::string places = keys_.placesBy(me_.token);
    const int world = putEtcdPlaces(client_, places, members, arrivals);
    json summary{{"round", round_},        {"restart_count", restartCount},
                 {"size", members.size()}, {"world_size", world},
                 {"places", places},       {"seen_at", revision_}};
    if (!members.empty()) summary["machine0"] = toJson(members[0]);
    if (members.size() > 1) summary["machine1"] = toJson(members[1]);
    if (client_.create(record_key_, summary.dump())) {
      record_ =
          EtcdKeyValue{record_key_, summary.dump(), client_.revision(), client_.revision(), 1, 0};
      closed_members_ = std::move(members);
    } else {
      client_.deletePrefix(places);  // another head's record stands: these places are no one's
      record_ = client_.get(record_key_);
    }
  }

  // The machine ranks of the round before, by token (none in round 0, or when it never formed):
  // its places, every chunk (the head alone reads them).
  std::map<std::string, int> previousRanks() const {
    if (round_ == 0) return {};
    auto record = client_.get(etcdRoundKeys(m_, round_ - 1).record());
    if (!record) return {};
    const json j = json::parse(record->value, nullptr, false);
    if (!j.is_object() || !j.contains("places") || !j["places"].is_string()) return {};
    std::map<int, json> byRank;
    for (const auto& kv : client_.getPrefix(j["places"].get<std::string>())) {
      const json chunk = json::parse(kv.value, nullptr, false);
      if (!chunk.is_array()) continue;
      for (const auto& p : chunk) {
        if (p.is_object()) byRank[p.value("rank", -1)] = p;
      }
    }
    json members = json::array();
    for (const auto& [rank, p] : byRank) members.push_back(p);
    return ranksByToken(members);
  }

  EtcdRound resultOf(const EtcdKeyValue& record) const {
    const json j = json::parse(record.value, nullptr, false);
    if (!j.is_object() || (!j.contains("closed") && !j.contains("machine0"))) {
      throw Error("etcd key " + record.key +
                  " holds no round record: " + record.value.substr(0, 200));
    }
    EtcdRound r;
    r.closed_at = record.mod_revision;
    r.restart_count = j.value("restart_count", 0);
    r.watches = watches_;
    r.checks = checks_;
    r.closed = j.value("closed", "");
    if (!r.closed.empty()) return r;
    r.size = j.value("size", 0);
    r.world_size = j.value("world_size", 0);
    r.places = j.value("places", "");
    r.seen_at = j.value("seen_at", int64_t{0});
    if (!closed_members_.empty()) {
      r.members = closed_members_;
      for (size_t m = 0; m < r.members.size(); ++m) {
        if (r.members[m].token == me_.token) r.machine_rank = static_cast<int>(m);
        if (r.machine_rank < 0) r.rank_offset += r.members[m].local_world_size;
      }
      if (r.machine_rank < 0) r.rank_offset = 0;
      return r;
    }
    r.members.push_back(memberFrom(j["machine0"], record.key));
    if (j.contains("machine1")) r.members.push_back(memberFrom(j["machine1"], record.key));
    auto place = findEtcdPlace(client_, r.places, *mine_);
    if (!place) {  // a spare; unless the put was tried again and its revision is not the key's
      auto held = client_.get(mine_->key);
      if (held && held->create_revision != mine_->create_revision) {
        place = findEtcdPlace(client_, r.places, *held);
      }
    }
    if (place) {
      r.machine_rank = place->machine_rank;
      r.rank_offset = place->rank_offset;
    }
    return r;
  }

  std::string timedOut() const {
    std::string hosts;
    for (const auto& [token, r] : registered_) hosts += (hosts.empty() ? "" : ", ") + r.member.host;
    return "round " + std::to_string(round_) + " on etcd at " + client_.endpointInUse() + ": " +
           std::to_string(registered_.size()) + " of " + std::to_string(s_.leastMachines()) +
           " machines joined within " + secondsText(s_.timeouts.join) +
           (hosts.empty() ? "" : " (" + hosts + ")");
  }

  EtcdApi& client_;
  const EtcdMeeting& m_;
  const GroupSettings& s_;  // m_.job
  Clock& clock_;
  const int round_;
  const int restart_count_;
  const int expect_machines_;
  const EtcdMember& me_;
  const RoundKeys keys_;
  const std::string round_prefix_, member_prefix_, record_key_;
  std::optional<EtcdKeyValue> mine_;  // this agent's registration, as etcd holds it
  std::optional<EtcdKeyValue> record_;
  std::optional<std::string> failed_;  // the round did not form: why
  time_point join_by_, follow_until_;  // the join's end; a follower's next look at the round
  time_point next_progress_;           // when the next progress notice is said
  int64_t revision_ = 0;
  std::unique_ptr<EtcdApi> watched_at_;  // a client of the watches' endpoint alone
  time_point heard_;  // when a watch brought something last (or its endpoint answered)
  int watches_ = 0, checks_ = 0;

  // A follower's watch of the record's keys: the record and the head's (RoundKeys::head).
  std::unique_ptr<EtcdWatchStream> record_watch_;

  // The head's.
  bool head_ = false;
  std::optional<bool> enrolled_as_head_;  // what the enrollment said, until createdHead() asks
  struct Registration {
    int64_t arrival = 0;  // its key's create revision
    EtcdMember member;
    int restart_count = 0;    // what its agent knew when it registered
    int expect_machines = 0;  // the machines its agent expected (RoundStart)
  };
  std::map<std::string, Registration> registered_;  // by token
  std::map<std::string, int> before_;               // the round before's machine ranks, by token
  std::optional<RoundClosing> closing_;             // when the round may close (round/closing.h)
  bool adopted_ = false;                    // closing_ is the survivors' rule (adoptSurvivorsRule)
  std::unique_ptr<EtcdWatchStream> watch_;  // of the round's keys
  // While the round before's members decide: a watch of their registrations.
  std::unique_ptr<EtcdWatchStream> held_members_;
  std::vector<EtcdMember> closed_members_;  // every member, when this agent's record stands
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

std::string etcdRegistration(const EtcdMember& member) { return toJson(member).dump(); }

int putEtcdPlaces(EtcdApi& client, const std::string& places,
                  const std::vector<EtcdMember>& members, const std::vector<int64_t>& arrivals) {
  json chunk = json::array();
  int offset = 0;
  for (size_t rank = 0; rank < members.size(); ++rank) {
    chunk.push_back(placeJson(members[rank], static_cast<int>(rank), offset));
    offset += members[rank].local_world_size;
    if (rank + 1 == members.size() || (rank + 1) % RoundKeys::kPlacesPerChunk == 0) {
      client.put(places + orderKey(members[rank].previous_rank, arrivals.at(rank)), chunk.dump());
      chunk = json::array();
    }
  }
  return offset;
}

std::optional<EtcdPlace> findEtcdPlace(EtcdApi& client, const std::string& places,
                                       const EtcdKeyValue& registration) {
  const json j = json::parse(registration.value, nullptr, false);
  const EtcdMember who = memberFrom(j, registration.key);
  std::vector<std::string> orders;
  if (who.previous_rank >= 0) orders.push_back(orderKey(who.previous_rank, 0));
  orders.push_back(orderKey(-1, registration.create_revision));
  for (const auto& order : orders) {
    auto chunk = client.firstKeyFrom(places, places + order);
    if (!chunk) continue;
    if (auto place = placeIn(*chunk, who.token)) return place;
  }
  return std::nullopt;
}

Expected<EtcdRound> meetOnEtcd(EtcdApi& client, const EtcdMeeting& meeting, const RoundStart& start,
                               const EtcdMember& me) {
  return Meeting(client, meeting, start, me).run();
}

}  // namespace accel::launcher
