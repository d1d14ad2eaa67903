#include "launcher/rendezvous/job_link.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "launcher/base/event_fd.h"
#include "launcher/base/quiet_thread.h"

namespace accel::launcher {
JobLink::JobLink(std::unique_ptr<store::TcpStoreClient> watch, int watchFd,
                 std::unique_ptr<store::TcpStoreClient> publisher, RendezvousOptions rdzv,
                 int machineRank, std::string masterHost)
    : watch_(std::move(watch)),
      publisher_(std::move(publisher)),
      watch_fd_(watchFd),
      rdzv_(std::move(rdzv)),
      machine_rank_(machineRank),
      master_host_(std::move(masterHost)) {
  event_fd_ = makeEventFd();
  wake_fd_ = makeEventFd();
  thread_ = startQuietThread([this] { run(); });
}

JobLink::~JobLink() {
  stop();
  ::close(event_fd_);
  ::close(wake_fd_);
}

void JobLink::stop() {
  if (!thread_.joinable()) return;
  bool watchInUse;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    watchInUse = watch_fired_;
  }
  signalEventFd(wake_fd_);
  // A publication (or a read of the failure) blocked on an unreachable master fails at once; a
  // watch still parked is left as it is.
  publisher_->interrupt();
  if (watchInUse) watch_->interrupt();
  thread_.join();
}

bool JobLink::publish(JobFailure mine) {
  {
    std::lock_guard lock(mutex_);
    if (publish_requested_) return false;
    publish_requested_ = true;
    to_publish_ = std::move(mine);
  }
  signalEventFd(wake_fd_);
  return true;
}

void JobLink::shareStatus(std::string json) {
  {
    std::lock_guard lock(mutex_);
    to_share_ = std::move(json);
  }
  signalEventFd(wake_fd_);
}

std::vector<LinkEvent> JobLink::takeEvents() {
  drainEventFd(event_fd_);
  std::lock_guard lock(mutex_);
  return std::exchange(events_, {});
}

void JobLink::post(LinkEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  signalEventFd(event_fd_);
}

// Waits for the watch to fire or for a publication to do, until stopped. The watch fires once.
void JobLink::run() {
  bool watching = true;
  while (true) {
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {watching ? watch_fd_ : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    std::optional<JobFailure> mine;
    std::optional<std::string> status;
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      mine = std::exchange(to_publish_, std::nullopt);
      status = std::exchange(to_share_, std::nullopt);
    }
    drainEventFd(wake_fd_);
    if (mine) onPublish(*mine);
    // The watch before the status: a share to a master gone quiet blocks for the publisher's
    // timeout, and shares keep coming; the watch must not wait behind them.
    if (watching && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      watching = false;
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        watch_fired_ = true;
      }
      onWatchFired();
    }
    if (status && !master_lost_) onShare(*status);
  }
}

void JobLink::onPublish(const JobFailure& mine) {
  if (auto first = publishFailure(*publisher_, rdzv_, mine)) {
    post(LinkEvent{LinkEvent::Kind::kAnotherWasFirst, std::move(*first)});
  } else {
    post(LinkEvent{LinkEvent::Kind::kPublishedFirst, mine});
  }
}

void JobLink::onShare(const std::string& json) {
  try {
    publisher_->set(statusKeyPrefix(rdzv_) + std::to_string(machine_rank_), json);
  } catch (const std::exception&) {
    // Best effort: a master that cannot be reached shows up as the job's failure (the watch).
  }
}

void JobLink::onWatchFired() {
  try {
    watch_->finishWait();
    if (auto failure = readFailure(*watch_, rdzv_, machine_rank_)) {
      post(LinkEvent{LinkEvent::Kind::kRemoteFailure, std::move(*failure)});
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;  // interrupted by the destructor, not lost
    }
    master_lost_ = true;
    JobFailure lost;
    lost.machine_rank = 0;
    lost.host = master_host_;
    lost.reason = "lost contact with the master agent's store at " + rdzv_.store_address + " (" +
                  e.what() + ")";
    post(LinkEvent{LinkEvent::Kind::kRemoteFailure, std::move(lost)});
  }
}

}  // namespace accel::launcher
