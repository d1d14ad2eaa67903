// libaccel's progress heartbeat (libaccel/store/heartbeat.h) against our store server, observed
// the way the agent observes it (TcpStoreServerOptions::observed).
#include "libaccel/store/heartbeat.h"

#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "launcher/store/tcp_store_server.h"

namespace accel::store {
namespace {

using namespace std::chrono_literals;

struct Observed {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::vector<std::string>> writes;  // key → every value written, in order
};

// Our store server, telling `seen` every write to a heartbeat key (as it tells the agent).
std::unique_ptr<TcpStoreServer> observingServer(Observed& seen) {
  TcpStoreServerOptions options;
  options.observed.push_back(
      {"/accel_step/", [&seen](const std::string& key, const std::string& value) {
         std::lock_guard<std::mutex> lock(seen.mutex);
         seen.writes[key].push_back(value);
         seen.changed.notify_all();
       }});
  return TcpStoreServer::start(options);
}

TEST(Heartbeat, EachBeatReachesTheStoreAsOneStepAndTheObserverSeesIt) {
  Observed seen;
  auto server = observingServer(seen);
  TcpStoreClientOptions client;
  client.port = server->port();
  {
    Heartbeat heartbeat(client, "accel_step/3");
    for (int i = 0; i < 5; ++i) heartbeat.beat();
  }  // the destructor sends what is still counted
  std::unique_lock<std::mutex> lock(seen.mutex);
  ASSERT_TRUE(seen.changed.wait_for(lock, 10s, [&] {
    auto it = seen.writes.find("/accel_step/3");
    return it != seen.writes.end() && it->second.back() == "5";
  }));
  // Batched or not, the values only grow, and nothing else was observed.
  const auto& values = seen.writes["/accel_step/3"];
  for (size_t i = 1; i < values.size(); ++i)
    EXPECT_LT(std::stoll(values[i - 1]), std::stoll(values[i]));
  EXPECT_EQ(seen.writes.size(), 1u);
  TcpStoreClient reader(client);
  EXPECT_EQ(reader.get("accel_step/3"), "5");
}

// The rank's own work goes to the work key in the same batch as its steps, and before them: when
// the agent sees a step count, the work of every step before it is there.
TEST(Heartbeat, WorkReachesItsKeyBeforeTheStepsItBelongsTo) {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<std::string, std::string>> writes;  // in the order the server saw them
  TcpStoreServerOptions options;
  for (const char* prefix : {"/accel_step/", "/accel_work_us/"}) {
    options.observed.push_back({prefix, [&](const std::string& key, const std::string& value) {
                                  std::lock_guard<std::mutex> lock(mutex);
                                  writes.emplace_back(key, value);
                                  changed.notify_all();
                                }});
  }
  auto server = TcpStoreServer::start(options);
  TcpStoreClientOptions client;
  client.port = server->port();
  {
    Heartbeat heartbeat(client, "accel_step/1", "accel_work_us/1");
    heartbeat.beat(0);  // the first step: no step before it to measure
    heartbeat.beat(1500);
    heartbeat.beat(2500);
  }
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(changed.wait_for(lock, 10s, [&] {
    return !writes.empty() &&
           writes.back() == std::pair<std::string, std::string>{"/accel_step/1", "3"};
  }));
  std::string work = "0";
  for (const auto& [key, value] : writes) {
    if (key == "/accel_work_us/1") work = value;
    // Each step count arrives with the work of the steps before it: 0, then 1500 + 2500.
    if (key == "/accel_step/1" && value == "3") {
      EXPECT_EQ(work, "4000");
    }
    if (key == "/accel_step/1" && value == "1") {
      EXPECT_EQ(work, "0");
    }
  }
  EXPECT_EQ(work, "4000");
}

// Voluntary context switches of this process's thread named `name` so far; -1 when none is.
long voluntarySwitches(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    std::ifstream status(task.path() / "status");
    while (std::getline(status, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
    }
  }
  return -1;
}

// Between two ADDs the sending thread sleeps out the interval: a rank's steps then only count,
// they must not wake it (with a CPU per rank, each wake-up is a context switch that preempts a
// rank, once per step).
TEST(Heartbeat, StepsBetweenTwoSendsDoNotWakeTheSendingThread) {
  Observed seen;
  auto server = observingServer(seen);
  TcpStoreClientOptions client;
  client.port = server->port();
  Heartbeat heartbeat(client, "accel_step/0");
  heartbeat.beat();
  {
    std::unique_lock<std::mutex> lock(seen.mutex);
    ASSERT_TRUE(seen.changed.wait_for(lock, 10s, [&] { return !seen.writes.empty(); }));
  }
  // The first ADD arrived: the thread now sleeps out its 100 ms. 1000 steps 20 µs apart.
  const long before = voluntarySwitches(Heartbeat::kThreadName);
  ASSERT_GE(before, 0) << "no thread named " << Heartbeat::kThreadName;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    heartbeat.beat();
    const auto next = std::chrono::steady_clock::now() + 20us;
    while (std::chrono::steady_clock::now() < next) {
    }
  }
  const long woken = voluntarySwitches(Heartbeat::kThreadName) - before;
  // What a thread that sends every 100 ms may do meanwhile: a few switches per send (the
  // interval's sleep, the ADD's reply), however slow this machine made the loop.
  const auto intervals = (std::chrono::steady_clock::now() - start) / 100ms;
  EXPECT_LE(woken, 5 + 5 * intervals) << "over " << intervals << " send intervals";
}

TEST(Heartbeat, NoneWithoutTheAgentsKey) {
  ::unsetenv("ACCEL_HEARTBEAT_KEY");
  EXPECT_EQ(Heartbeat::fromEnvironment(), nullptr);
  ::setenv("ACCEL_HEARTBEAT_KEY", "", 1);
  EXPECT_EQ(Heartbeat::fromEnvironment(), nullptr);
  ::unsetenv("ACCEL_HEARTBEAT_KEY");
}

}  // namespace
}  // namespace accel::store
