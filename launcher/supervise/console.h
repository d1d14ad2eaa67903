#pragma once
// Console: the agent's writes to its own stdout and stderr (the workers' prefixed lines and the
// agent's notices), done by a thread of their own, so a paused terminal (Ctrl-S) or a full pipe
// never stalls supervision: the supervisor queues text and goes on.
//
// Nothing is dropped. The queue has a high-water mark: above it, backlogged() is true and the
// supervisor stops reading the workers' pipes (so a worker that writes faster than the console
// drains blocks in its own write, as it would under torchrun), and readyFd() becomes readable
// once the queue is back under the low-water mark.
//
// Every notice of the agent goes through notice(), whatever the phase (planning, rendezvous,
// supervision, summary), so `-q` and the "accel: " prefix are decided in one place. The writing
// thread starts with the first write: a job that never prints starts none.
//
// Thread-safety: every method may be called from any thread.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace accel::launcher {

class Console {
 public:
  // `quiet`: notices are dropped (workers' output and errors are not). `stdoutFd` and
  // `stderrFd`: where streams 1 and 2 go (the agent's own 1 and 2 by default).
  explicit Console(bool quiet = false, int stdoutFd = 1, int stderrFd = 2,
                   size_t highWater = 4u << 20);
  // Writes what is queued (blocking: nothing is supervised any more), then stops the thread.
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // Queues `text` for stream 1 (stdout) or 2 (stderr). Never blocks.
  void write(int stream, std::string text);
  // Queues "accel: `text`\n" for stderr, unless quiet ("accel:" in yellow with colour). Never
  // blocks.
  void notice(const std::string& text);
  // Whether stderr is a terminal that gets colour: a TTY, NO_COLOR unset (no-color.org) and TERM
  // not "dumb". Decided once, at construction.
  bool colour() const { return colour_; }
  // True while more than the high-water mark is queued.
  bool backlogged() const;
  // An eventfd, readable (and then drained by ackReady) once the backlog fell under half the
  // high-water mark after backlogged() was true.
  int readyFd() const { return ready_fd_; }
  void ackReady();
  // Blocks until everything queued so far is written (or the stream failed: a closed console).
  void flush();

 private:
  struct Chunk {
    int fd;
    std::string text;
  };
  void run();

  const bool quiet_;
  bool colour_ = false;
  const int fds_[2];
  const size_t high_water_;
  int ready_fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::deque<Chunk> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;  // the thread holds a chunk outside the queue
  bool signal_when_low_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace accel::launcher
