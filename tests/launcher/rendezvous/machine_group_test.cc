// clearWorkerKeys between attempts: the workers' keys go, the agents' stay, and the notice says
// what was removed in plain words.

#include "launcher/rendezvous/machine_group.h"

#include <gtest/gtest.h>

#include "launcher/rendezvous/c10d/group_store.h"
#include "launcher/rendezvous/round/keys.h"
#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/tcp_store_server.h"

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

  std::string clear(int round) {
    std::string said;
    TcpStoreHost host(*server_);
    clearWorkerKeys(host, round, [&](const std::string& s) { said += s; });
    return said;
  }

  std::unique_ptr<store::TcpStoreServer> server_;
  std::unique_ptr<store::TcpStoreClient> client_;
};

TEST_F(ClearWorkerKeysTest, RemovesWorkerKeysAndSaysHowManyPlainly) {
  client_->set("rank_0_ready", "1");
  client_->set("default_pg/0//cpu//0", "addr");
  client_->add("barrier_count", 1);
  client_->set(JobKeys::jobId(), "job-1");
  EXPECT_EQ(clear(1),
            "attempt 1: removed 3 values that earlier attempts' workers left in the job's store, "
            "so none is read as this attempt's");
  EXPECT_EQ(client_->get(JobKeys::jobId(), 1s), "job-1");  // the agents' keys stay
  EXPECT_FALSE(client_->check({"rank_0_ready"}));
}

TEST_F(ClearWorkerKeysTest, NothingToRemoveSaysNothing) {
  client_->set(JobKeys::jobId(), "job-1");
  EXPECT_EQ(clear(1), "");
  EXPECT_EQ(client_->get(JobKeys::jobId(), 1s), "job-1");
}

TEST_F(ClearWorkerKeysTest, OneValueIsSingular) {
  client_->set("only", "1");
  EXPECT_EQ(clear(2),
            "attempt 2: removed 1 value that earlier attempts' workers left in the job's store, "
            "so none is read as this attempt's");
}

}  // namespace
}  // namespace accel::launcher
