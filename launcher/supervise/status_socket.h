#pragma once
// `accel status`: every agent of this user on this machine answers on a Unix socket,
// <dir>/<agent pid>.sock, with one JSON object describing its job, then closes the connection.
// <dir> is $XDG_RUNTIME_DIR/accel, else /tmp/accel-<uid>: made mode 0700, and refused if it is
// not a directory owned by this user with that mode (another user must not read or plant
// sockets there). A socket whose agent is gone (connection refused, or no such pid) is removed
// by whoever finds it.

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libaccel/common/expected.h"

namespace accel::launcher {

// The directory for this user's agent sockets, made if missing. Errors name the path and why.
Expected<std::string> statusDirectory();

// The agent's end. Not thread-safe; the supervisor's loop owns it.
class StatusListener {
 public:
  StatusListener() = default;
  ~StatusListener() { close(); }
  StatusListener(const StatusListener&) = delete;
  StatusListener& operator=(const StatusListener&) = delete;

  // Listens (non-blocking) on <statusDirectory()>/<pid>.sock, mode 0600, after removing the
  // sockets of dead agents there.
  Expected<void> open();
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Stops listening and removes the socket (the agent's job is over: a client now finds it
  // gone instead of waiting for an answer). Idempotent.
  void close();

  // Answers every connection waiting to be accepted with `json` (one write, never blocking: a
  // client that does not read loses its answer) and closes it. Returns how many were answered.
  int answerAll(const std::string& json);

 private:
  int fd_ = -1;
  std::string path_;
};

// The client's end: every live agent's answer, in pid order. Dead agents' sockets are removed;
// an agent that does not answer within `timeout` is reported in `problems`.
std::vector<nlohmann::json> queryAgents(
    std::vector<std::string>& problems,
    std::chrono::milliseconds timeout = std::chrono::seconds(2));

// The agents' answers as a table per job, for people.
std::string renderStatusText(const std::vector<nlohmann::json>& agents);

}  // namespace accel::launcher
