#include "launcher/rendezvous/c10d/job_link.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "launcher/base/text.h"

namespace accel::launcher {

JobLink::JobLink(LinkConnections connections, GroupSettings settings, int round, int machineRank,
                 std::string masterHost, LinkOptions options)
    : watch_(std::move(connections.watch)),
      publisher_(std::move(connections.publisher)),
      keep_alive_(std::move(connections.keep_alive)),
      watch_fd_(connections.watch_fd),
      settings_(std::move(settings)),
      round_(round),
      machine_rank_(machineRank),
      master_host_(std::move(masterHost)),
      options_(std::move(options)),
      clock_(*settings_.clock),
      liveness_(options_.machines, options_.max_machines, machineRank, settings_.timeouts,
                clock_.now()) {
  next_tick_ = next_presence_check_ = clock_.now();
  const auto& t = settings_.timeouts;
  keep_alive_->setTimeout(t.keep_alive_interval);
  keep_alive_->setConnectTimeouts(t.keep_alive_interval,
                                  std::min(t.keep_alive_retry, t.keep_alive_interval));
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  for (int fd : {mailbox_.wakeFd(), watch_fd_}) {
    epoll_event interest{};
    interest.events = EPOLLIN;
    interest.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &interest);
  }
  thread_ = clock_.startThread([this] { run(); });
}

JobLink::~JobLink() {
  stop();
  ::close(epoll_fd_);
}

void JobLink::stop() {
  if (!thread_.joinable()) return;
  const bool watchInUse = mailbox_.requestStop();  // the thread reads (or read) the watch
  // A publication (or a read of the failure) blocked on an unreachable master fails at once; a
  // watch still parked is left as it is.
  publisher_->interrupt();
  keep_alive_->interrupt();
  if (watchInUse) watch_->interrupt();
  clock_.joinThread(thread_);
}

// Waits for the watch to fire or for a publication to do, until stopped. The watch fires once.
void JobLink::run() {
  bool watching = true;
  while (true) {
    epoll_event ready[2];
    const int n =
        clock_.wait(epoll_fd_, ready, 2, master_lost_ ? Clock::time_point::max() : nextCheck());
    if (n < 0 && errno != EINTR) return;
    bool watchFired = false;
    for (int i = 0; i < n; ++i) watchFired |= ready[i].data.fd == watch_fd_;
    auto [mine, status, stopping, regroup] = mailbox_.take();
    if (stopping) return;
    if (mine) onPublish(*mine);
    if (regroup && !change_published_) publishMembershipChange(*regroup);
    // The watch before the status: a share to a master gone quiet blocks for the publisher's
    // timeout, and shares keep coming; the watch must not wait behind them.
    if (watching && watchFired) {
      watching = false;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watch_fd_, nullptr);
      if (!mailbox_.markBusy()) return;  // stopping: the watch is not read
      onWatchFired();
    }
    if (status && !master_lost_) onShare(*status);
    if (!master_lost_ && clock_.now() >= next_presence_check_) checkPresence();
    if (!master_lost_ && clock_.now() >= next_tick_) onTick();
  }
}

// The next keep-alive tick, or the master's next look at the members.
Clock::time_point JobLink::nextCheck() const {
  return master() ? std::min(next_tick_, next_presence_check_) : next_tick_;
}

// The master, every presence_check (100 ms): a member whose agent's connection to the store
// closed is gone (its process died), found without waiting for its keep-alives to stop; then
// the members' keep-alive counters. Read this often (the store is the master's own), a silent
// member is found within presence_check of its window's end, not up to two keep-alive
// intervals after it (when the counters were read once per interval).
void JobLink::checkPresence() {
  next_presence_check_ = clock_.now() + settings_.timeouts.presence_check;
  if (!master()) return;
  try {
    for (int m = 0; m < options_.machines && options_.present; ++m) {
      if (!liveness_.watching(m)) continue;
      auto change = liveness_.presence(m, options_.present(m), [this, m] { return finished(m); });
      if (change) onChange(*change, "its connection to the job's store closed");
    }
    checkMembers();
  } catch (const std::exception&) {
    // The master's own store does not fail; a publication that did is the keep-alives' to find.
  }
}

std::vector<LostMachine> JobLink::lostMachines() const { return mailbox_.lost(); }

// Every keep_alive_interval: this machine's keep-alive, and the master's look for machines
// waiting to join.
void JobLink::onTick() {
  next_tick_ = clock_.now() + settings_.timeouts.keep_alive_interval;
  sendKeepAlive();
  if (!master()) return;
  try {
    checkArrivals();
  } catch (const std::exception&) {
    // The master's own store does not fail.
  }
}

// Blocks at most keep_alive_interval, reconnecting included (a call that times out drops its
// connection, and the next tick makes a fresh one): on a path that is down the thread tries
// afresh every keep_alive_retry, so a keep-alive lands right after the path returns, and the
// watch is looked at between tries.
void JobLink::sendKeepAlive() {
  try {
    keep_alive_->add(roundKeys(settings_, round_).alive(machine_rank_), 1);
  } catch (const std::exception&) {
    // A master gone for good shows up on the watch.
  }
}

// A member whose keep-alive did not move for the window is lost (Liveness). The master reads the
// counters in its own store's memory: a look at 4,096 members costs no request (it cost 4,096,
// ten times a second, a whole core of the 2-core VM: scripts/bench/rdzv_scale.sh --loss).
void JobLink::checkMembers() {
  const auto now = clock_.now();
  for (int m = 0; m < options_.machines; ++m) {
    if (!liveness_.watching(m)) continue;
    const int64_t count = options_.keep_alives
                              ? options_.keep_alives(m)
                              : publisher_->add(roundKeys(settings_, round_).alive(m), 0);
    auto change = liveness_.keepAlive(m, count, now, [this, m] { return finished(m); });
    if (change) onChange(*change, liveness_.windowText());
  }
}

// Whether member `machine` said it finished before it went (its workers ended and its agent
// left the job): then it is not lost.
bool JobLink::finished(int machine) {
  return publisher_->check({roundKeys(settings_, round_).finished(machine)});
}

// What Liveness found: a member lost (`detail` explains how it was found) or a machine joining
// is published as the round's stop record, the first change of the round only (the record
// stands); a member that left changes nothing.
void JobLink::onChange(const GroupChange& change, const std::string& detail) {
  if (change.kind == GroupChange::Kind::kLost) markLost(change.lost(), detail);
  if (change.kind == GroupChange::Kind::kJoined && !change_published_) {
    publishMembershipChange(RoundStop::growing(change.how));
  }
}

// A member lost (how, and what explains it, `detail`): published as the round's failure.
void JobLink::markLost(const LostMachine& machine, const std::string& detail) {
  const auto at = static_cast<size_t>(machine.machine);
  mailbox_.addLost(machine);
  const std::string host = at < options_.hosts.size() ? options_.hosts[at] : "";
  publishMembershipChange(RoundStop::failed(lostFailure(machine, host, detail)));
}

// A machine registered for the next round while the group has room: re-form to take it — if its
// agent is still there. One that registered and died is judged once (its slot is passed over
// from then on), not re-formed for: the next round would not wait for it either.
void JobLink::checkArrivals() {
  if (options_.machines >= options_.max_machines || change_published_) return;
  const int registered =
      static_cast<int>(publisher_->add(jobKeys(settings_).round(round_ + 1).arrivals(), 0));
  for (; arrivals_gone_ < registered; ++arrivals_gone_) {
    if (registrationPresent(*publisher_, settings_, round_ + 1, arrivals_gone_)) break;
  }
  if (auto change = liveness_.arrivals(registered - arrivals_gone_)) onChange(*change, "");
}

// Published as the round's stop record (the first one stands): every member's watch fires.
void JobLink::publishMembershipChange(const RoundStop& change) {
  change_published_ = true;
  publishStop(*publisher_, settings_, round_, change);
}

void JobLink::onPublish(const JobFailure& mine) {
  mailbox_.postPublished(mine,
                         publishStop(*publisher_, settings_, round_, RoundStop::failed(mine)));
}

void JobLink::onShare(const std::string& json) {
  try {
    publisher_->set(jobKeys(settings_).status(machine_rank_), json);
  } catch (const std::exception&) {
    // Best effort: a master that cannot be reached shows up as the job's failure (the watch).
  }
}

void JobLink::onWatchFired() {
  try {
    watch_->finishWait();
    if (auto stop = readStop(*watch_, settings_, round_, machine_rank_)) {
      mailbox_.post(LinkEvent::heard(std::move(*stop), LinkEvent::Kind::kRemoteFailure));
    }
  } catch (const std::exception& e) {
    if (mailbox_.stopping()) return;  // interrupted by the destructor, not lost
    master_lost_ = true;
    JobFailure lost;
    lost.machine_rank = 0;
    lost.host = master_host_;
    lost.reason = storeLost(settings_, e.what(), !master() && settings_.elastic());
    mailbox_.post(LinkEvent::of(LinkEvent::Kind::kRemoteFailure, std::move(lost)));
  }
}

void keepWatchAlive(int fd, const RoundTimeouts& t) {
  const int on = 1, idle = static_cast<int>(t.watch_idle.count()),
            interval = static_cast<int>(t.watch_interval.count()), probes = t.watch_probes;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  const unsigned userTimeoutMs = static_cast<unsigned>((idle + interval * probes) * 1000);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof userTimeoutMs);
}

}  // namespace accel::launcher
