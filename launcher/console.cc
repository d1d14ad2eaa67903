#include "launcher/console.h"

#include <unistd.h>

#include <cstdint>

#include "launcher/event_fd.h"
#include "launcher/quiet_thread.h"
#include "launcher/subprocess_posix.h"

namespace accel::launcher {

Console::Console(int stdoutFd, int stderrFd, size_t highWater)
    : fds_{stdoutFd, stderrFd}, high_water_(highWater) {
  ready_fd_ = makeEventFd();
  thread_ = startQuietThread([this] { run(); });
}

Console::~Console() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
  if (ready_fd_ >= 0) ::close(ready_fd_);
}

void Console::write(int stream, std::string text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    queued_bytes_ += text.size();
    queue_.push_back(Chunk{fds_[stream == 1 ? 0 : 1], std::move(text)});
    if (queued_bytes_ > high_water_) signal_when_low_ = true;
  }
  wake_.notify_one();
}

bool Console::backlogged() const {
  std::lock_guard lock(mutex_);
  return queued_bytes_ > high_water_;
}

void Console::ackReady() { drainEventFd(ready_fd_); }

void Console::flush() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

// Writes chunk after chunk; the lock is not held while writing, so write() never waits for the
// terminal. At the end (stop_), what is queued is still written.
void Console::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Chunk chunk = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    writeAll(chunk.fd, chunk.text.data(),
             chunk.text.size());  // a failed stream loses this chunk only
    lock.lock();
    writing_ = false;
    queued_bytes_ -= chunk.text.size();
    if (signal_when_low_ && queued_bytes_ <= high_water_ / 2) {
      signal_when_low_ = false;
      signalEventFd(ready_fd_);
    }
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace accel::launcher
