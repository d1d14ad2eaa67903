// libaccel's progress heartbeat (libaccel/store/heartbeat.h) against our store server, observed
// the way the agent observes it (TcpStoreServerOptions::on_observed_write).
#include "libaccel/store/heartbeat.h"

#include <stdlib.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "libaccel/store/tcp_store_server.h"

namespace accel::store {
namespace {

using namespace std::chrono_literals;

struct Observed {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::vector<std::string>> writes;  // key → every value written, in order
};

TEST(Heartbeat, EachBeatReachesTheStoreAsOneStepAndTheObserverSeesIt) {
  Observed seen;
  TcpStoreServerOptions options;
  options.observed_key_prefix = "/accel_step/";
  options.on_observed_write = [&seen](const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(seen.mutex);
    seen.writes[key].push_back(value);
    seen.changed.notify_all();
  };
  auto server = TcpStoreServer::start(options);
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

TEST(Heartbeat, NoneWithoutTheAgentsKey) {
  ::unsetenv("ACCEL_HEARTBEAT_KEY");
  EXPECT_EQ(Heartbeat::fromEnvironment(), nullptr);
  ::setenv("ACCEL_HEARTBEAT_KEY", "", 1);
  EXPECT_EQ(Heartbeat::fromEnvironment(), nullptr);
  ::unsetenv("ACCEL_HEARTBEAT_KEY");
}

}  // namespace
}  // namespace accel::store
