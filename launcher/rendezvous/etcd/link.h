#pragma once
// EtcdLink: a round's link (round_link.h) through etcd, where no machine is in charge. Every
// agent's link watches the round's keys on a thread of its own:
//   - the round's stop record (RoundKeys::stop): the first machine whose workers fail creates it
//     (one transaction: the first stands) and every link hears it — the job's first failure;
//   - the members' registrations (RoundKeys::member, attached to each agent's lease), from the
//     revision the round's record was made from: one that etcd removes (its machine found in
//     the record's places: nothing is read of the members that stay) is a machine whose agent
//     stopped renewing its lease (its process or machine
//     gone, for the keep-alive window) — lost, unless it said it finished (Liveness judges it, as
//     it judges the store's presence and keep-alives: round/liveness.h); whichever link sees it
//     first publishes it as the round's stop record, so machine 0 is lost like any other (one that
//     never said it started the round — it died between its registration and the close — stops
//     the round as the group's growth does: re-formed without it, no restart counted);
//   - the next round's registrations: a machine arriving while the group has room (Liveness's
//     arrivals) stops the round for the group to re-form (the group's growth, round/stop.h: not
//     a failure).
// The agent's own lease lost (EtcdLease::lost: etcd gone for the window, or the others dropped
// this machine) is reported by the agent through leaseLost(): the job's end on this machine.
//
// A watch whose endpoint goes away is opened again from the last revision it brought, on
// whichever endpoint the client reaches then; nothing that happened in between is missed (etcd
// keeps the history; where it was compacted meanwhile, the members are read afresh instead). An
// endpoint that goes silent instead (its machine cut off: no reset, no error, no events) is found
// by asking it every keep-alive interval for a read that needs etcd's quorum — unless the agent's
// lease renewals reached it within the interval, which shows the same at no cost (an idle group
// of N machines asked etcd 2N requests a second, half of them these); one that cannot serve it is
// left the same way.
//
// Thread-safety as RoundLink's; leaseLost from any thread. The thread is started, and waits,
// through meeting.job.clock. The constructor blocks to read the
// round's stop record and open the watches (throws accel::NetworkError when etcd cannot be
// reached). Each etcd call of the link is bounded by 2 s, and so is stop() when etcd is gone.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/rendezvous/etcd/api.h"
#include "launcher/rendezvous/etcd/meeting.h"
#include "launcher/rendezvous/link_mailbox.h"
#include "launcher/rendezvous/round/liveness.h"
#include "launcher/rendezvous/round_link.h"

namespace accel::launcher {

struct EtcdLinkOptions {
  EtcdOptions etcd;
  EtcdConnect connect = realEtcd().connect;  // the clock is meeting.job.clock
  EtcdMeeting meeting;  // the job's settings (MAX, timeouts, clock), its keys' root, the lease
  int round = 0;
  int machine_rank = 0;  // this machine's in the round
  int machines = 0;      // the round's
  // Where the round's places are (EtcdRound::places): a registration gone is found there.
  std::string places;
  // The revision the round's record was made from (EtcdRound::seen_at): the members'
  // registrations are watched from the one after (0: from now).
  int64_t seen_at = 0;
  // When the agent's lease renewals last reached an endpoint ("host:port"; nullopt: not lately),
  // e.g. EtcdLease::answeredBy: a renewal that endpoint took shows it serves, so the link does not
  // ask it again within the interval. Called from the link's thread until stop(); empty: the
  // link always asks.
  std::function<std::optional<Clock::time_point>(const std::string&)> answered;
  // The leases' TTL, for messages. The watches' endpoint is asked whether it still serves every
  // meeting.job.timeouts.keep_alive_interval.
  std::chrono::seconds window{3};
};

class EtcdLink : public RoundLink {
 public:
  explicit EtcdLink(EtcdLinkOptions options);
  ~EtcdLink() override;
  EtcdLink(const EtcdLink&) = delete;
  EtcdLink& operator=(const EtcdLink&) = delete;

  int fd() const override { return mailbox_.fd(); }
  bool publish(JobFailure mine) override { return mailbox_.publish(std::move(mine)); }
  // Any machine: etcd has none in charge.
  std::string exclude(int machine, std::string why) override {
    mailbox_.regroup(RoundStop::excluding(machine, std::move(why)));
    return "";
  }
  // Put under JobKeys::status(machine) with this agent's lease (gone with it).
  void shareStatus(std::string json) override { mailbox_.shareStatus(std::move(json)); }
  std::vector<LinkEvent> takeEvents() override { return mailbox_.takeEvents(); }
  // Ends the thread and closes the watches (what it found lost stays for lostMachines()).
  void stop() override;
  std::vector<LostMachine> lostMachines() const override { return mailbox_.lost(); }
  // This agent's lease is lost (`why`): reported as the job's end here, once, at once.
  void leaseLost(const std::string& why);

 private:
  // What each watch follows.
  enum class Watched { kStop, kMembers, kArrivals };
  struct Watch {
    Watched what;
    std::unique_ptr<EtcdWatchStream> watch;
  };
  // A member as the link found it (machine -1: the registration was no member's).
  struct Member {
    int machine = -1;
    std::string host;
  };

  void run();
  bool drainWatches();
  void waitForWork();
  void reconnect();
  bool watchEndpointServes();
  void readRound();
  void readMembers();
  void openWatches();
  void onEvent(const EtcdEvent& e, Watched what);
  void onStop(const std::string& value);
  void onMemberGone(const EtcdKeyValue& registration);
  Member memberOf(const EtcdKeyValue& registration);
  bool markLost(int machine);
  void neverStarted(int machine, const std::string& host);
  void onArrival();
  void onPublish(const JobFailure& mine);
  void onShare(const std::string& json);
  std::optional<RoundStop> publishStop(const RoundStop& stop);

  const EtcdLinkOptions o_;
  Clock& clock_;
  const std::unique_ptr<EtcdApi> client_;
  const RoundKeys keys_, next_keys_;
  // The last revision each watch brought (by Watched): opened again from the one after, so that
  // nothing is missed and nothing read again.
  int64_t seen_[3] = {0, 0, 0};
  std::vector<Watch> watches_;             // empty: to be opened (again)
  std::map<std::string, Member> members_;  // the members' registrations found, by key
  bool compacted_ = false;  // a watch's history was compacted away: readMembers() next
  std::unique_ptr<EtcdApi> watch_check_;  // a client of the watches' endpoint alone
  Clock::time_point next_check_;
  Liveness liveness_;        // the thread's: lost, left and joined, judged as on the store
  bool self_lost_ = false;   // the thread's: this agent's own registration went
  bool stop_heard_ = false;  // the thread's: the stop record was posted as an event
  bool change_published_ = false;
  LinkMailbox mailbox_;  // the supervisor's side
  std::mutex lease_mutex_;
  bool lease_lost_ = false;  // leaseLost's: said once
  std::thread thread_;
};

}  // namespace accel::launcher
