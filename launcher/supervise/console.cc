#include "launcher/supervise/console.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "launcher/base/event_fd.h"
#include "launcher/base/posix.h"
#include "launcher/base/quiet_thread.h"

namespace accel::launcher {

Console::Console(bool quiet, int stdoutFd, int stderrFd, size_t highWater)
    : quiet_(quiet), fds_{stdoutFd, stderrFd}, high_water_(highWater) {
  ready_fd_ = makeEventFd();
  const char* noColour = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  colour_ =
      ::isatty(stderrFd) == 1 && !(noColour && *noColour) && !(term && std::string(term) == "dumb");
}

Console::~Console() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (ready_fd_ >= 0) ::close(ready_fd_);
}

void Console::write(int stream, std::string text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    queued_bytes_ += text.size();
    queue_.push_back(Chunk{fds_[stream == 1 ? 0 : 1], std::move(text)});
    if (queued_bytes_ > high_water_) signal_when_low_ = true;
    if (!thread_.joinable()) thread_ = startQuietThread([this] { run(); });
  }
  wake_.notify_one();
}

void Console::notice(const std::string& text) {
  if (!quiet_) write(2, (colour_ ? "\033[33maccel:\033[0m " : "accel: ") + text + "\n");
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
