// clearWorkerKeys between attempts: the workers' keys go, the agents' stay, and the notice says
// what was removed in plain words. The agents' tokens and the placement notice, shared by every
// backend.

#include "launcher/rendezvous/machine_group.h"

#include <unistd.h>

#include <set>

#include <gtest/gtest.h>

#include "launcher/rendezvous/round/keys.h"
#include "launcher/rendezvous/store_host.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/tcp_store_client.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class ClearWorkerKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = store::TcpStoreServer::start({});
    store::TcpStoreClientOptions c;
    c.port = server_->port();
    client_ = std::make_unique<store::TcpStoreClient>(c);
  }

  size_t clear() {
    TcpStoreHost host(*server_, std::make_shared<KeepAliveBoard>());
    std::string said;
    const size_t removed = clearWorkerKeys(host, [&](const std::string& s) { said += s; });
    EXPECT_EQ(said, "");  // routine: nothing said unless it fails
    return removed;
  }

  std::unique_ptr<store::TcpStoreServer> server_;
  std::unique_ptr<store::TcpStoreClient> client_;
};

TEST_F(ClearWorkerKeysTest, RemovesWorkerKeysAndKeepsTheAgents) {
  client_->set("rank_0_ready", "1");
  client_->set("default_pg/0//cpu//0", "addr");
  client_->add("barrier_count", 1);
  client_->set(JobKeys::jobId(), "job-1");
  EXPECT_EQ(clear(), 3u);
  EXPECT_EQ(client_->get(JobKeys::jobId(), 1s), "job-1");  // the agents' keys stay
  EXPECT_FALSE(client_->check({"rank_0_ready"}));
  EXPECT_FALSE(client_->check({"barrier_count"}));
}

TEST_F(ClearWorkerKeysTest, NothingToRemove) {
  client_->set(JobKeys::jobId(), "job-1");
  EXPECT_EQ(clear(), 0u);
  EXPECT_EQ(client_->get(JobKeys::jobId(), 1s), "job-1");
}

// Every agent's token is its own, however many draw at once in one process (the tests' agents).
TEST(AgentTokenTest, HostPidAndADrawThatDiffers) {
  std::set<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.insert(agentToken("h1"));
  EXPECT_EQ(tokens.size(), 1000u);
  EXPECT_EQ(tokens.begin()->rfind("h1-" + std::to_string(::getpid()) + "-", 0), 0u);
}

TEST(PlacedTextTest, OneRankOrARange) {
  Placement p;
  p.machine_rank = 1, p.num_machines = 3, p.rank_offset = 2, p.world_size = 6;
  EXPECT_EQ(placedText(p, 2), "machine 1 of 3: ranks 2\u20133 of 6");
  p.rank_offset = 1, p.world_size = 3;
  EXPECT_EQ(placedText(p, 1), "machine 1 of 3: rank 1 of 3");
}

}  // namespace
}  // namespace accel::launcher
