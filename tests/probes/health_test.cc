// The health checks a machine runs before each round (probes/health.h), for real: a shell
// command's exit and last line, its timeout (the command and what it started are gone by then),
// and free space against a threshold.

#include "probes/health.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace accel::probes {
namespace {

using namespace std::chrono_literals;

// Whether `pid` runs (a zombie waiting for its reaper does not).
bool runs(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pidText, comm, state;
  return ::kill(pid, 0) == 0 && stat >> pidText >> comm >> state && state != "Z";
}

HealthSettings commandOnly(const std::string& command, std::chrono::milliseconds timeout = 10s) {
  HealthSettings s;
  s.shm = "";
  s.command = command;
  s.command_timeout = timeout;
  return s;
}

TEST(HealthChecks, ACommandThatExitsZeroPasses) {
  const auto checks = runHealthChecks(commandOnly("echo all good"));
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].passed);
  EXPECT_EQ(checks[0].detail, "all good (exit 0)");
  EXPECT_EQ(firstFailure(checks), std::nullopt);
}

// Its last line of output, stdout or stderr, says why; the exit code is kept.
TEST(HealthChecks, AFailingCommandIsNamedByItsLastLine) {
  const auto checks =
      runHealthChecks(commandOnly("echo checking; echo 'GPU 3: 2 uncorrectable ECC errors' >&2; "
                                  "exit 3"));
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_EQ(firstFailure(checks), "command failed: GPU 3: 2 uncorrectable ECC errors (exit 3)");
}

// Past its timeout the command fails, and what it started is killed with it (its process group):
// the child's pid, written first, names no process afterwards.
TEST(HealthChecks, ACommandPastItsTimeoutFailsAndLeavesNothingRunning) {
  const std::string pidFile = ::testing::TempDir() + "health_child.pid";
  std::remove(pidFile.c_str());
  const auto start = std::chrono::steady_clock::now();
  const auto checks = runHealthChecks(
      commandOnly("sleep 30 & echo $! > '" + pidFile + "'; wait", std::chrono::milliseconds(300)));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_NE(checks[0].detail.find("did not finish within 300 ms"), std::string::npos)
      << checks[0].detail;
  EXPECT_LT(took, 5s);
  std::ifstream in(pidFile);
  pid_t child = 0;
  ASSERT_TRUE(in >> child);
  for (int i = 0; i < 100 && runs(child); ++i) ::usleep(10000);  // the kill lands
  EXPECT_FALSE(runs(child)) << "the command's child " << child << " still runs";
}

// Free space: a threshold no disk meets fails, naming the directory and what it has; a
// directory that does not exist fails, naming it.
TEST(HealthChecks, FreeSpaceBelowTheLeastFailsNamingTheDirectory) {
  HealthSettings s;
  s.shm = "";
  s.directories = {::testing::TempDir(), "/no/such/dir"};
  s.min_free_bytes = 1ull << 62;
  const auto checks = runHealthChecks(s);
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_NE(checks[0].detail.find(" MiB free under " + ::testing::TempDir() + ", below "),
            std::string::npos)
      << checks[0].detail;
  EXPECT_FALSE(checks[1].passed);
  EXPECT_EQ(checks[1].detail,
            "/no/such/dir cannot be read (it does not exist, or is not reachable)");
  s.min_free_bytes = 0;
  s.directories = {::testing::TempDir()};
  s.shm = "/dev/shm";
  EXPECT_EQ(firstFailure(runHealthChecks(s)), std::nullopt);
}

// The link of the interface that reaches the others, as /sys/class/net says (a directory of our
// own here): up and unknown (loopback, virtual interfaces) pass; down fails saying so; an interface
// that is not there fails naming it.
TEST(HealthChecks, TheInterfacesLinkMustNotBeDown) {
  const std::string net = ::testing::TempDir() + "health_net";
  for (const auto& [iface, state] :
       {std::pair{"eth0", "up"}, std::pair{"lo", "unknown"}, std::pair{"eth1", "down"}}) {
    ASSERT_EQ(::system(("mkdir -p " + net + "/" + iface).c_str()), 0);
    std::ofstream(net + "/" + iface + "/operstate") << state << "\n";
  }
  auto link = [&](const std::string& iface) {
    HealthSettings s;
    s.shm = "";
    s.sys_class_net = net;
    s.interface = iface;
    return runHealthChecks(s);
  };
  EXPECT_EQ(firstFailure(link("eth0")), std::nullopt);
  EXPECT_EQ(firstFailure(link("lo")), std::nullopt);
  EXPECT_EQ(firstFailure(link("eth1")), "link eth1 failed: operstate down");
  EXPECT_EQ(firstFailure(link("eth9")), "link eth9 failed: no interface eth9 (" + net + ")");
}

}  // namespace
}  // namespace accel::probes

namespace accel::probes {
namespace {

// The workers' interpreter must find torch: Debian's python3 has it (python3-torch), the pyenv
// one first on PATH here has not, and a missing one cannot be run.
TEST(HealthChecks, TheInterpreterMustFindTorch) {
  HealthSettings s;
  s.shm = "";
  s.python = "/usr/bin/python3";
  auto checks = runHealthChecks(s);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "python");
  if (!checks[0].passed) GTEST_SKIP() << "/usr/bin/python3 has no torch here: " << checks[0].detail;
  EXPECT_EQ(checks[0].detail.rfind("torch ", 0), 0u) << checks[0].detail;
  EXPECT_NE(checks[0].detail.find("(/usr/bin/python3"), std::string::npos) << checks[0].detail;
  s.python = "/nonexistent/python3";
  checks = runHealthChecks(s);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_EQ(checks[0].detail.rfind("/nonexistent/python3 cannot be run: ", 0), 0u)
      << checks[0].detail;
}

// One of the rendezvous's endpoints must accept a connection: a name that does not resolve is
// passed over for the next, which listens; alone it fails, named.
TEST(HealthChecks, OneRendezvousEndpointMustAnswer) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  HealthSettings s;
  s.directories = {};
  s.shm = "";
  s.endpoints = {{"no-such-host.invalid", 2379}, {"127.0.0.1", port}};
  auto checks = runHealthChecks(s);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "rendezvous");
  EXPECT_TRUE(checks[0].passed) << checks[0].detail;
  EXPECT_EQ(checks[0].detail, "127.0.0.1:" + std::to_string(port) + " answers");
  s.endpoints = {{"no-such-host.invalid", 2379}};
  checks = runHealthChecks(s);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_NE(checks[0].detail.find("no-such-host.invalid"), std::string::npos) << checks[0].detail;
  ::close(listener);
}

}  // namespace
}  // namespace accel::probes
