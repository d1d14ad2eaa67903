#pragma once
// JobLink: one agent's part in the cross-machine failure protocol of a multi-machine job, run on
// a thread of its own so the supervisor's event loop never waits for the network.
//
// The protocol: every agent parks a WAIT on the round's stop key (RoundKeys::stop) in the master's
// store (the "watch", connected before the rendezvous); the first machine whose job fails publishes
// its failure there with one compare-and-set, so exactly one is the job's first; the watch of every
// agent then fires and each reads the failure. The store unreachable (the master's machine gone,
// its link down) makes the watch fire too: a lost master is a failure of the job.
//
// The supervisor calls publish() and reads events when fd() is readable; both return at once.
// Whatever the network does, stop() returns within keep_alive_retry (200 ms) too: it shuts down
// the connections a call of the thread may be blocked on (that call fails; a keep-alive's
// reconnection try in progress ends at its bound) and joins the thread. The watch's parked
// WAIT stays until the link is destroyed: the master counts the parked watches before a round's
// workers start (awaitWatches, c10d/store_rounds.cc).
//
// Liveness: the link's thread adds 1 to the round's keep-alive key of this machine every
// keep_alive_interval, on a connection of its own whose every call (and reconnection) is bounded
// by that interval: a keep-alive lost on a path that goes down is not retransmitted by TCP's
// backoff (0.2, 0.4, 0.8, 1.6 s ...) but replaced, on a fresh connection tried every
// keep_alive_retry (200 ms), so the first one after the path returns lands within that. The
// master's link (machine 0's) watches every other member two ways, every presence_check (100
// ms): its agent's presence (options.present: its connection to the store — an agent whose process
// died is gone within that) and its keep-alives (one that did not move for keep_alive_misses
// intervals went silent: its machine or link is gone; found within presence_check of that window's
// end). A member found either way is lost, unless it said it finished before it left
// (RoundKeys::finished, round/keys.h) — the link publishes that as the round's failure (cause
// kCauseLost), so every machine stops its workers at once, and lostMachines() names it. While the
// group is smaller than max_machines, the master's link also publishes a machine registered for the
// next round (the group's growth, round/stop.h, on the same key, so that one thing stops the
// round): every link reports that as kGroupGrows, not as a failure, and the group re-forms.
//
// Thread-safety: publish, takeEvents and fd may be called from any one thread (the supervisor's);
// lostMachines and masterLost from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/base/clock.h"
#include "launcher/rendezvous/c10d/link_store.h"
#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/link_mailbox.h"
#include "launcher/rendezvous/round/liveness.h"
#include "launcher/rendezvous/round_end.h"
#include "launcher/rendezvous/round_link.h"
#include "launcher/report/job_report.h"

namespace accel::launcher {

// What a round's link needs beyond the GroupSettings it is given (whose timeouts set the
// keep-alive period and misses and the presence look, and whose clock runs the link's thread).
struct LinkOptions {
  int machines = 1;                // the round's group
  int max_machines = 1;            // the most the job takes
  std::vector<std::string> hosts;  // by machine rank, for messages
  // The master's: whether member M's agent is still connected to the store (unset: unknown),
  // looked at every settings.timeouts.presence_check.
  std::function<bool(int machine)> present;
  // The master's: member M's keep-alive counter now, read without a request (StoreHost::
  // keepAlives); unset: read from the store through the publisher's connection.
  std::function<int64_t(int machine)> keep_alives;
};

// A link's connections to the master's store (c10d/link_store.h: the TCP client's, or an in-memory
// store's in the tests), each used by the link's thread alone.
struct LinkConnections {
  // Has its wait on the round's stop key (roundKeys(settings, round).stop()) started
  // (startWait), which `watch_fd` (its descriptor) reports.
  std::unique_ptr<LinkStore> watch;
  int watch_fd = -1;
  // Publications, `accel status` shares, the master's looks at the members.
  std::unique_ptr<LinkStore> publisher;
  // This machine's keep-alives (made bounded by the link, see above).
  std::unique_ptr<LinkStore> keep_alive;
};

// TCP keep-alives on the failure watch's connection `fd`, the one that waits on the master for
// the whole round: a master whose machine or link vanishes without closing it (no FIN, no RST)
// is noticed after timeouts' watch_idle + watch_probes x watch_interval (~5 s), and the watch
// then fails as for a closed connection — the job ends on this machine, saying the master was
// lost. Data left unacknowledged as long fails it too (keep-alives only probe an idle
// connection).
void keepWatchAlive(int fd, const RoundTimeouts& timeouts);

class JobLink : public RoundLink {
 public:
  // The link of round `round`, over `connections` (all three set).
  JobLink(LinkConnections connections, GroupSettings settings, int round, int machineRank,
          std::string masterHost, LinkOptions options = {});
  ~JobLink() override;  // stop(), then closes the connections
  JobLink(const JobLink&) = delete;
  JobLink& operator=(const JobLink&) = delete;

  // RoundLink's (round_link.h); the status goes to JobKeys::status(machine rank).
  int fd() const override { return mailbox_.fd(); }
  bool publish(JobFailure mine) override { return mailbox_.publish(std::move(mine)); }
  // Machine 0 hosts the rendezvous: the others cannot go on without it.
  std::string exclude(int machine, std::string why) override {
    if (machine == 0) return "machine 0 hosts the job's rendezvous (c10d): the others need it";
    mailbox_.regroup(RoundStop::excluding(machine, std::move(why)));
    return "";
  }
  void shareStatus(std::string json) override { mailbox_.shareStatus(std::move(json)); }
  std::vector<LinkEvent> takeEvents() override { return mailbox_.takeEvents(); }
  void stop() override;
  // True once the watch's connection to the master failed (its machine or link gone): nothing
  // of the master's store can be reached any more.
  bool masterLost() const { return master_lost_.load(); }
  // The master's link: the members found lost so far, in the order found.
  std::vector<LostMachine> lostMachines() const override;

 private:
  // Machine 0's link: the master's, which watches the other members.
  bool master() const { return machine_rank_ == 0; }
  void run();
  void onWatchFired();
  void onPublish(const JobFailure& mine);
  void onShare(const std::string& json);
  void onTick();
  void sendKeepAlive();
  void checkMembers();
  void checkPresence();
  void onChange(const GroupChange& change, const std::string& detail);
  void markLost(const LostMachine& machine, const std::string& detail);
  bool finished(int machine);
  Clock::time_point nextCheck() const;
  void checkArrivals();
  void publishMembershipChange(const RoundStop& change);

  std::unique_ptr<LinkStore> watch_, publisher_, keep_alive_;
  const int watch_fd_;
  const GroupSettings settings_;
  const int round_;
  const int machine_rank_;
  const std::string master_host_;
  const LinkOptions options_;
  // The link thread's own: when it next sends a keep-alive and looks at the members' presence,
  // and its judgement of them (the master's).
  Clock& clock_;
  Clock::time_point next_tick_, next_presence_check_;
  Liveness liveness_;
  bool change_published_ = false;
  int arrivals_gone_ = 0;  // the next round's first registrations, whose agents died
  LinkMailbox mailbox_;    // the supervisor's side (busy: the thread reads the watch)
  int epoll_fd_ = -1;  // the link thread's wait: the mailbox's wake fd and the watch's descriptor
  std::atomic<bool> master_lost_{false};
  std::thread thread_;
};

}  // namespace accel::launcher
