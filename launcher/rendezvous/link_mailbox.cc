#include "launcher/rendezvous/link_mailbox.h"

#include <unistd.h>

#include <utility>

#include "launcher/base/event_fd.h"

namespace accel::launcher {

LinkMailbox::LinkMailbox() : event_fd_(makeEventFd()), wake_fd_(makeEventFd()) {}

LinkMailbox::~LinkMailbox() {
  ::close(event_fd_);
  ::close(wake_fd_);
}

bool LinkMailbox::publish(JobFailure mine) {
  {
    std::lock_guard lock(mutex_);
    if (publish_requested_) return false;
    publish_requested_ = true;
    to_publish_ = std::move(mine);
  }
  signalEventFd(wake_fd_);
  return true;
}

void LinkMailbox::regroup(RoundStop stop) {
  {
    std::lock_guard lock(mutex_);
    to_regroup_ = std::move(stop);
  }
  signalEventFd(wake_fd_);
}

void LinkMailbox::wake() { signalEventFd(wake_fd_); }

void LinkMailbox::shareStatus(std::string json) {
  {
    std::lock_guard lock(mutex_);
    to_share_ = std::move(json);
  }
  signalEventFd(wake_fd_);
}

std::vector<LinkEvent> LinkMailbox::takeEvents() {
  drainEventFd(event_fd_);
  std::lock_guard lock(mutex_);
  return std::exchange(events_, {});
}

std::vector<LostMachine> LinkMailbox::lost() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

bool LinkMailbox::requestStop() {
  bool busy;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    busy = busy_;
  }
  signalEventFd(wake_fd_);
  return busy;
}

// The descriptor is drained before the queue is read: a publication queued in between then
// leaves the descriptor readable (a wake-up to spare), where draining after the read could take
// its wake-up and leave it queued until the link's next timeout.
LinkMailbox::Work LinkMailbox::take() {
  drainEventFd(wake_fd_);
  Work work;
  std::lock_guard lock(mutex_);
  work.publish = std::exchange(to_publish_, std::nullopt);
  work.share = std::exchange(to_share_, std::nullopt);
  work.stop = stop_;
  work.regroup = std::exchange(to_regroup_, std::nullopt);
  return work;
}

bool LinkMailbox::stopping() const {
  std::lock_guard lock(mutex_);
  return stop_;
}

bool LinkMailbox::markBusy() {
  std::lock_guard lock(mutex_);
  if (stop_) return false;
  busy_ = true;
  return true;
}

void LinkMailbox::post(LinkEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  signalEventFd(event_fd_);
}

void LinkMailbox::postPublished(const JobFailure& mine, std::optional<RoundStop> first) {
  if (first) {
    post(LinkEvent::heard(std::move(*first), LinkEvent::Kind::kAnotherWasFirst));
  } else {
    post(LinkEvent::of(LinkEvent::Kind::kPublishedFirst, mine));
  }
}

void LinkMailbox::addLost(LostMachine machine) {
  std::lock_guard lock(mutex_);
  lost_.push_back(std::move(machine));
}

}  // namespace accel::launcher
