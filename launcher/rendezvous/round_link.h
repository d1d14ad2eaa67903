#pragma once
// RoundLink: what the supervisor sees of a round's link to the other machines of a job — the
// job's first failure, wherever it happened, and the group changing — whatever carries it:
// JobLink (c10d/job_link.h) through the master's store, EtcdLink (etcd/link.h) through etcd.
//
// Thread-safety: publish, shareStatus, takeEvents and fd may be called from any one thread (the
// supervisor's); stop and lostMachines from any thread. None blocks on the network. Both links
// hold their supervisor's side in a LinkMailbox (link_mailbox.h).

#include <string>
#include <vector>

#include "launcher/rendezvous/round/stop.h"
#include "launcher/rendezvous/round_end.h"
#include "launcher/report/job_report.h"

namespace accel::launcher {

struct LinkEvent {
  enum class Kind {
    kRemoteFailure,    // the job's first failure is another machine's (or the master is lost)
    kPublishedFirst,   // this machine's failure was published and is the job's first
    kAnotherWasFirst,  // publishing found another machine's failure already there
    kGroupGrows        // no failure: a machine waits to join, the group re-forms (`grows`: why)
  };
  Kind kind;
  JobFailure failure;  // the job's first failure (for kPublishedFirst: this machine's); not for
                       // kGroupGrows
  std::string grows;   // kGroupGrows: why the group re-forms
  int excluded = -1;   // kGroupGrows: the machine it re-forms without (a straggler's), if any

  // A failure's event (every kind but kGroupGrows).
  static LinkEvent of(Kind kind, JobFailure failure) { return {kind, std::move(failure), "", -1}; }
  // The round's stop record as heard: kGroupGrows for the group's growth, else `failureKind`.
  static LinkEvent heard(RoundStop stop, Kind failureKind) {
    if (stop.isGrowth()) return {Kind::kGroupGrows, {}, std::move(stop.grows), stop.excluded};
    return {failureKind, std::move(*stop.failure), "", -1};
  }
};

class RoundLink {
 public:
  virtual ~RoundLink() = default;
  // Readable when takeEvents() has something.
  virtual int fd() const = 0;
  // Queues this machine's failure for publication; the outcome arrives as an event. Only the
  // first call of the job counts (false for later ones: no event will come).
  virtual bool publish(JobFailure mine) = 0;
  // Queues the exclusion of member `machine` (a straggler's: `why`) as the round's stop record,
  // unless something stopped the round first; every machine hears it as kGroupGrows. Returns why
  // it cannot be done ("" when queued): on the master's store, machine 0 hosts the rendezvous.
  virtual std::string exclude(int machine, std::string why) = 0;
  // Queues this machine's `accel status` answer for the agents of the other machines (only the
  // newest queued one is sent, best effort).
  virtual void shareStatus(std::string json) = 0;
  // The events so far (and drains fd()).
  virtual std::vector<LinkEvent> takeEvents() = 0;
  // Ends the link's thread (no event after it), within a moment whatever the network does.
  // Idempotent.
  virtual void stop() = 0;
  // The members found lost so far, in the order found.
  virtual std::vector<LostMachine> lostMachines() const = 0;
};

}  // namespace accel::launcher
