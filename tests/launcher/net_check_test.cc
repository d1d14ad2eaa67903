#include "launcher/net_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

TEST(NetCheckTest, RouteToLoopbackIsTheLoopbackInterface) {
  auto route = routeTo("127.0.0.1");
  ASSERT_TRUE(route) << route.error();
  EXPECT_EQ(route->address, "127.0.0.1");
  EXPECT_EQ(route->local_ip, "127.0.0.1");
  EXPECT_EQ(route->interface, "lo");
  EXPECT_EQ(describeInterface(*route), "lo (127.0.0.1)");
}

TEST(NetCheckTest, UnresolvableNameIsAnErrorNamingIt) {
  auto route = routeTo("no-such-host.invalid");
  ASSERT_FALSE(route);
  EXPECT_NE(route.error().find("cannot resolve 'no-such-host.invalid'"), std::string::npos) << route.error();
  auto reached = waitForListener("no-such-host.invalid", 29500, 5s, 1s, nullptr);
  ASSERT_FALSE(reached);  // at once, not after 5 s
  EXPECT_NE(reached.error().find("at no-such-host.invalid:29500: cannot resolve"), std::string::npos) << reached.error();
}

TEST(NetCheckTest, WaitsForAListenerAndNamesHostPortAndInterfaceWhenNoneComes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  // Bound but not listening: connections are refused.
  std::vector<std::string> progress;
  auto refused = waitForListener("127.0.0.1", port, 300ms, 100ms, [&](const std::string& s) { progress.push_back(s); });
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("at 127.0.0.1:" + std::to_string(port) + " from local interface lo (127.0.0.1): "
                                 "Connection refused"),
            std::string::npos)
      << refused.error();
  EXPECT_FALSE(progress.empty());
  ASSERT_EQ(::listen(fd, 4), 0);
  EXPECT_TRUE(waitForListener("127.0.0.1", port, 2s, 1s, nullptr));
  ::close(fd);
}

}  // namespace
}  // namespace accel::launcher
