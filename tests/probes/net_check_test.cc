#include "probes/net_check.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace accel::probes {
namespace {

using namespace std::chrono_literals;

// "Said at once" without a stopwatch: waitForListener is given an hour, and a progress report is
// due after every failed attempt (progressEvery 0). Reporting is what a retry does first, so a
// report means it went on waiting; the report throws, so that such a regression fails the test
// at once instead of hanging for the hour.
struct RetryDetector {
  int reports = 0;
  std::function<void(const std::string&)> progress() {
    return [this](const std::string& status) {
      ++reports;
      throw std::runtime_error("waited instead of failing at once: " + status);
    };
  }
};

TEST(NetCheckTest, RouteToLoopbackIsTheLoopbackInterface) {
  auto route = routeTo("127.0.0.1");
  ASSERT_TRUE(route) << route.error();
  EXPECT_EQ(route->address, "127.0.0.1");
  EXPECT_EQ(route->local_ip, "127.0.0.1");
  EXPECT_EQ(route->interface, "lo");
  EXPECT_EQ(describeInterface(*route), "lo (127.0.0.1)");
}

// Which agent hosts a c10d rendezvous: loopback, and any address one of this machine's
// interfaces holds, is this machine; another address, or a name that does not resolve, is not.
TEST(NetCheckTest, IsThisMachineKnowsItsOwnAddresses) {
  EXPECT_TRUE(isThisMachine("127.0.0.1"));
  EXPECT_TRUE(isThisMachine("127.0.1.1"));
  EXPECT_TRUE(isThisMachine("localhost"));
  EXPECT_FALSE(isThisMachine("192.0.2.7"));  // TEST-NET-1: documentation only, never assigned
  EXPECT_FALSE(isThisMachine("no-such-host.invalid"));
  ifaddrs* list = nullptr;
  ASSERT_EQ(::getifaddrs(&list), 0) << std::strerror(errno);
  int checked = 0;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof text);
    EXPECT_TRUE(isThisMachine(text)) << text << " on " << i->ifa_name;
    ++checked;
  }
  ::freeifaddrs(list);
  EXPECT_GE(checked, 1);
}

TEST(NetCheckTest, UnresolvableNameIsAnErrorNamingIt) {
  auto route = routeTo("no-such-host.invalid");
  ASSERT_FALSE(route);
  EXPECT_NE(route.error().find("cannot resolve 'no-such-host.invalid'"), std::string::npos)
      << route.error();
}

// A name that does not resolve may be a pod that is not ready yet (Kubernetes): it is waited for,
// with progress reports, until the timeout, and the error then names it.
TEST(NetCheckTest, UnresolvableNameIsWaitedForUntilTheTimeout) {
  std::vector<std::string> progress;
  auto reached = waitForListener("no-such-host.invalid", 29500, 300ms, 0ms,
                                 [&](const std::string& s) { progress.push_back(s); });
  ASSERT_FALSE(reached);
  EXPECT_NE(reached.error().find(
                "cannot reach the master agent (machine_rank 0) at no-such-host.invalid:29500: "
                "cannot resolve 'no-such-host.invalid'"),
            std::string::npos)
      << reached.error();
  EXPECT_NE(reached.error().find("(yet) (tried for 0 s;"), std::string::npos) << reached.error();
  ASSERT_GE(progress.size(), 1u);
  EXPECT_EQ(progress[0].rfind("waiting for the master agent at no-such-host.invalid:29500: cannot "
                              "resolve 'no-such-host.invalid'",
                              0),
            0u)
      << progress[0];
}

// etcd named "localhost" on its own machine: the route is loopback, and the address the peers are
// told is an interface that is up and not loopback (one this machine holds).
TEST(NetCheckTest, OutwardRouteIsAnUpInterfaceOtherThanLoopback) {
  auto loop = routeTo("localhost");
  ASSERT_TRUE(loop) << loop.error();
  EXPECT_TRUE(isLoopback(*loop));
  EXPECT_TRUE(isLoopback(Route{"", "::1", "lo"}));
  EXPECT_FALSE(isLoopback(Route{"", "10.0.0.1", "eth0"}));
  auto out = outwardRoute();
  ASSERT_TRUE(out) << out.error();
  EXPECT_FALSE(isLoopback(*out));
  EXPECT_NE(out->interface, "lo");
  EXPECT_NE(out->interface, "");
  EXPECT_TRUE(isThisMachine(out->local_ip)) << out->local_ip;
  // A namespace whose only interface is loopback has none.
  std::optional<Expected<Route>> alone;
  std::string skipped;
  std::thread inNamespace([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      skipped = std::string("cannot make a network namespace: ") + std::strerror(errno);
      return;
    }
    alone = outwardRoute();
  });
  inNamespace.join();
  if (!skipped.empty()) GTEST_SKIP() << skipped;
  ASSERT_TRUE(alone.has_value());
  ASSERT_FALSE(*alone);
  EXPECT_EQ(alone->error(), "no network interface other than loopback is up here");
}

TEST(NetCheckTest, AddressWithNoRouteIsReportedAtOnce) {
  // A network namespace of its own for one thread: only a loopback interface, which is down, so
  // no address has a route. Needs CAP_SYS_ADMIN.
  RetryDetector retries;
  std::optional<Expected<Route>> reached;
  std::string skipped, thrown;
  std::thread inNamespace([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      skipped = std::string("cannot make a network namespace: ") + std::strerror(errno);
      return;
    }
    try {
      reached = waitForListener("10.1.2.3", 29500, 3600s, 0ms, retries.progress());
    } catch (const std::exception& e) {
      thrown = e.what();
    }
  });
  inNamespace.join();
  if (!skipped.empty()) GTEST_SKIP() << skipped;
  EXPECT_EQ(thrown, "");
  EXPECT_EQ(retries.reports, 0);
  ASSERT_TRUE(reached.has_value());
  ASSERT_FALSE(*reached);
  EXPECT_EQ(reached->error(),
            "cannot reach the master agent (machine_rank 0) at 10.1.2.3:29500: no route from this "
            "machine to '10.1.2.3': Network is unreachable (is --main_process_ip right?)");
}

TEST(NetCheckTest, WaitsForAListenerAndNamesHostPortAndInterfaceWhenNoneComes) {
  // Port 0: the kernel picks a free one, and this socket keeps it for the whole test.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  // Bound but not listening: connections are refused. A progress report is due after every attempt.
  std::vector<std::string> progress;
  auto refused = waitForListener("127.0.0.1", port, 300ms, 0ms,
                                 [&](const std::string& s) { progress.push_back(s); });
  ASSERT_FALSE(refused);
  const std::string where =
      "127.0.0.1:" + std::to_string(port) + " from local interface lo (127.0.0.1): ";
  EXPECT_NE(refused.error().find("at " + where + "Connection refused"), std::string::npos)
      << refused.error();
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front(),
            "waiting for the master agent at " + where + "Connection refused (0 s)");
  ASSERT_EQ(::listen(fd, 4), 0);
  EXPECT_TRUE(waitForListener("127.0.0.1", port, 2s, 1s, nullptr));
  ::close(fd);
}

}  // namespace
}  // namespace accel::probes
