#pragma once
// LinkMailbox: what passes between the supervisor's thread and a round link's own thread
// (c10d/job_link.h, etcd/link.h), whatever carries the link: to the link, the failure to publish
// (once per job), the newest `accel status` answer to share and the request to stop; back, the
// events and the machines found lost — each way with an eventfd that wakes the other side.
//
// Thread-safety: every method may be called from any thread.

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous/round_link.h"

namespace accel::launcher {

class LinkMailbox {
 public:
  LinkMailbox();
  ~LinkMailbox();  // closes both eventfds
  LinkMailbox(const LinkMailbox&) = delete;
  LinkMailbox& operator=(const LinkMailbox&) = delete;

  // --- the supervisor's side (RoundLink's calls) ---
  int fd() const { return event_fd_; }  // readable when takeEvents() has something
  bool publish(JobFailure mine);        // false after the first call: no event will come
  void regroup(RoundStop stop);         // a re-forming to publish (RoundLink::exclude)
  void shareStatus(std::string json);   // replaces one not taken yet
  std::vector<LinkEvent> takeEvents();  // and drains fd()
  std::vector<LostMachine> lost() const;
  // Asks the link's thread to stop and wakes it; returns whether the thread had said it is busy
  // (markBusy), read in the same step.
  bool requestStop();
  // Wakes the link's thread for something it keeps outside the mailbox (EtcdLink's lost lease).
  void wake();

  // --- the link thread's side ---
  int wakeFd() const { return wake_fd_; }  // readable when something was queued
  struct Work {
    std::optional<JobFailure> publish;
    std::optional<std::string> share;
    bool stop = false;
    std::optional<RoundStop> regroup;
  };
  Work take();  // what was queued since the last take (and drains wakeFd())
  bool stopping() const;
  // Says the thread is busy with something a stop must interrupt; false (nothing marked) when a
  // stop was requested already.
  bool markBusy();
  void post(LinkEvent event);
  // The outcome of publishing this machine's failure `mine` as the round's stop record: `first`,
  // the record that stood already (another machine's failure, or the group's growth), or nullopt
  // when `mine` stands.
  void postPublished(const JobFailure& mine, std::optional<RoundStop> first);
  void addLost(LostMachine machine);

 private:
  int event_fd_ = -1;  // link → supervisor
  int wake_fd_ = -1;   // supervisor → link
  mutable std::mutex mutex_;
  std::optional<JobFailure> to_publish_;
  std::optional<std::string> to_share_;
  std::optional<RoundStop> to_regroup_;
  bool publish_requested_ = false;
  bool stop_ = false;
  bool busy_ = false;
  std::vector<LinkEvent> events_;
  std::vector<LostMachine> lost_;
};

}  // namespace accel::launcher
