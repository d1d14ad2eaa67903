// The port checks and the choice between hosting a c10d rendezvous and joining it.
#include "probes/ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "accel/error.h"

namespace accel::probes {
namespace {

// A scripted listen(): each call takes the next outcome ("ok" or "taken"); the log records every
// call of the three callables in order.
struct Script {
  Script(std::vector<std::string> o, bool l = false) : outcomes(std::move(o)), listener(l) {}
  std::vector<std::string> outcomes;
  bool listener;
  std::vector<std::string> log;
  size_t next = 0;

  HostOutcome run(int attempts) {
    return hostOrJoin(
        [this] {
          log.push_back("listen");
          if (outcomes.at(next++) == "taken") throw AddressInUseError("taken");
        },
        [this] {
          log.push_back("listener?");
          return listener;
        },
        [this] { log.push_back("pause"); }, attempts);
  }
};

TEST(HostOrJoinTest, ListeningAtOnceHosts) {
  Script s{{"ok"}};
  EXPECT_EQ(s.run(50), HostOutcome::Hosted);
  EXPECT_EQ(s.log, (std::vector<std::string>{"listen"}));
}

TEST(HostOrJoinTest, APortSomeoneListensOnIsJoinedWithoutRetrying) {
  Script s{{"taken"}, true};
  EXPECT_EQ(s.run(50), HostOutcome::Join);
  EXPECT_EQ(s.log, (std::vector<std::string>{"listen", "listener?"}));
}

// Two agents bound together and both failed to listen: nobody listens, so this one tries again
// (after a pause) and hosts.
TEST(HostOrJoinTest, ATakenPortWithoutListenerIsTriedAgainAfterAPause) {
  Script s{{"taken", "taken", "ok"}, false};
  EXPECT_EQ(s.run(50), HostOutcome::Hosted);
  EXPECT_EQ(s.log, (std::vector<std::string>{"listen", "listener?", "pause", "listen", "listener?",
                                             "pause", "listen"}));
}

TEST(HostOrJoinTest, GivesUpAndJoinsAfterTheLastAttempt) {
  Script s{{"taken", "taken", "taken"}, false};
  EXPECT_EQ(s.run(3), HostOutcome::Join);
  EXPECT_EQ(s.log, (std::vector<std::string>{"listen", "listener?", "pause", "listen", "listener?",
                                             "pause", "listen"}));
}

TEST(HostOrJoinTest, OtherErrorsPropagate) {
  EXPECT_THROW(
      hostOrJoin([] { throw NetworkError("cannot resolve"); }, [] { return false; }, [] {}, 50),
      NetworkError);
}

// A socket this test listens on is seen; once closed, it is not.
TEST(PortsTest, PortHasListenerSeesAListeningSocket) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  EXPECT_FALSE(portHasListener(port));  // bound, not listening
  ASSERT_EQ(::listen(fd, 1), 0);
  EXPECT_TRUE(portHasListener(port));
  ::close(fd);
  EXPECT_FALSE(portHasListener(port));
}

}  // namespace
}  // namespace accel::probes
