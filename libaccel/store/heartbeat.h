#pragma once
// Heartbeat: tells the agent that this rank made progress, by one store ADD of 1 on the key the
// agent gives each worker in $ACCEL_HEARTBEAT_KEY ("accel_step/<RANK>"): the key's value is the
// number of steps the rank has begun. The agent watches these keys to say which rank is stuck
// and where the others are (`accel status`, --hang_timeout). Any worker can do the same; from
// Python:
//   hb = torch.distributed.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
//   is_master=False) hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)   # each step, before its
//   collectives
//
// beat() never blocks on the network: a thread of its own ("accel-heartbeat"), with a connection
// of its own, sends what the training thread counted, at most ten ADDs a second (steps in between
// go together; they do not wake the thread, so a rank pays no context switch per step). A
// store that cannot be reached costs one line on stderr, and the heartbeat falls silent; training
// goes on.
//
// Each step can also carry the rank's own work in it (beat(workMicros)): the time the step took
// minus the time this rank waited for the others in collectives. The thread ADDs it to the key in
// $ACCEL_WORK_KEY ("accel_work_us/<RANK>") before the steps, in the same batch, so when the agent
// sees a step count, the work total covers every step before it: the agent's straggler scores
// (launcher/supervise/stragglers.h). From Python, with `hb` as above:
//   hb.add(os.environ["ACCEL_WORK_KEY"], int(own_work_seconds * 1e6))   # before the step's ADD

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "libaccel/store/tcp_store_client.h"

namespace accel::store {

class Heartbeat {
 public:
  static constexpr const char* kThreadName = "accel-heartbeat";

  // From $ACCEL_HEARTBEAT_KEY, $ACCEL_WORK_KEY, $MASTER_ADDR and $MASTER_PORT; nullptr when the
  // heartbeat key is unset (not launched by accel) or empty. Throws nothing.
  static std::unique_ptr<Heartbeat> fromEnvironment();

  // Starts the sending thread; the connection is made there. `workKey` empty: work is not sent.
  Heartbeat(TcpStoreClientOptions options, std::string key, std::string workKey = "");
  // Sends what is still counted (bounded by the client's timeouts: from the environment, 10 s to
  // connect and 5 s per call), then stops the thread.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Counts one step, and `workMicros` of this rank's own work (the step before it, not waiting in
  // collectives; 0: unknown). Non-blocking (a mutex held for an increment); thread-safe.
  void beat(int64_t workMicros = 0);

 private:
  void run();

  TcpStoreClientOptions options_;
  const std::string key_;
  const std::string work_key_;
  std::mutex mutex_;
  std::condition_variable wake_;
  int64_t pending_ = 0;
  int64_t pending_work_ = 0;  // microseconds
  bool idle_ = false;         // the thread waits for a step (not sleeping out the interval)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace accel::store
