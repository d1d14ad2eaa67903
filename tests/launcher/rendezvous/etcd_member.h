#pragma once
// EtcdCluster: real etcd members (Debian's etcd-server, /usr/bin/etcd) for a test — one or
// several, on loopback, each with a data directory of its own, never a system service. Ports
// come from a range picked by the test's pid; a port already taken makes a member exit saying
// so, and the whole cluster is started again on the next ports (no port is bound and closed to
// find a free one). Ready once a write goes through (the cluster has a leader); the destructor
// SIGKILLs every member and removes the directories. With TLS (EtcdTls): clients speak https to
// members whose certificates tests/fixtures/tls/make_certs.sh made.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/rendezvous/etcd/client/etcd_client.h"

namespace accel::launcher::testing {

inline const char* kEtcdBinary = "/usr/bin/etcd";

// Certificates of tests/fixtures/tls/make_certs.sh in `dir`; client_cert_auth: etcd asks
// clients for a certificate signed by the CA.
struct EtcdTls {
  std::string dir;
  bool client_cert_auth = false;
  std::string file(const std::string& name) const { return dir + "/" + name; }
  // What a client that trusts the test's CA (and has its client certificate) gives.
  TlsFiles client() const { return {file("ca.pem"), file("client.pem"), file("client.key")}; }
};

// Makes the certificates in a new directory under /tmp (its path in `dir`); false with why.
inline bool makeTestCertificates(std::string& dir, std::string& why) {
  char tmpl[] = "/tmp/accel-certs-XXXXXX";
  dir = ::mkdtemp(tmpl);
  const std::string command =
      std::string("bash ") + ACCEL_TLS_CERTS_SCRIPT + " " + dir + " >" + dir + "/make.log 2>&1";
  if (std::system(command.c_str()) == 0) return true;
  why = "tests/fixtures/tls/make_certs.sh failed (openssl): see " + dir + "/make.log";
  return false;
}

class EtcdCluster {
 public:
  // Whether every thread of process `pid` is stopped (state T in /proc/PID/task/TID/stat).
  static bool allStopped(int pid) {
    std::error_code ec;
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::ifstream stat(task.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t paren = line.rfind(')');
      if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') {
        return false;
      }
    }
    return !ec;
  }

  // Starts `members` members; nullptr with `why` when it cannot (no etcd installed, or the
  // cluster never answered).
  static std::unique_ptr<EtcdCluster> start(int members, std::string& why,
                                            std::optional<EtcdTls> tls = std::nullopt) {
    if (::access(kEtcdBinary, X_OK) != 0) {
      why = std::string(kEtcdBinary) + " is not installed (Debian's etcd-server; scripts/setup.sh)";
      return nullptr;
    }
    const int base = 31000 + static_cast<int>(::getpid() % 1000) * 8;
    for (int port = base; port < base + 10 * 2 * members; port += 2 * members) {
      auto cluster = std::unique_ptr<EtcdCluster>(new EtcdCluster(members, port, tls));
      if (cluster->ready(why)) return cluster;
      if (why.find("address already in use") == std::string::npos) return nullptr;
    }
    return nullptr;
  }

  ~EtcdCluster() {
    for (size_t i = 0; i < pids_.size(); ++i) kill(static_cast<int>(i));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  int size() const { return static_cast<int>(pids_.size()); }
  int clientPort(int member) const { return base_ + 2 * member; }
  std::string endpoint(int member = 0) const {
    return "127.0.0.1:" + std::to_string(clientPort(member));
  }
  // Every member's endpoint, comma-separated (as --rdzv_endpoint takes them).
  std::string endpoints() const {
    std::string all;
    for (int i = 0; i < size(); ++i) all += (i ? "," : "") + endpoint(i);
    return all;
  }
  // The member whose endpoint is `text` (-1: none).
  int memberAt(const std::string& text) const {
    for (int i = 0; i < size(); ++i) {
      if (endpoint(i) == text) return i;
    }
    return -1;
  }
  // SIGSTOP / SIGCONT a member: its connections stay open and say nothing, as a machine cut off
  // from the network does. pause() returns once every thread of it is stopped (/proc says so):
  // SIGSTOP reaches a process's threads one by one, and one still running answers.
  void pause(int member) {
    const int pid = pids_[static_cast<size_t>(member)];
    ::kill(pid, SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!allStopped(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  void resume(int member) { ::kill(pids_[static_cast<size_t>(member)], SIGCONT); }
  void kill(int member) {
    pid_t& pid = pids_[static_cast<size_t>(member)];
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

 private:
  EtcdCluster(int members, int base, std::optional<EtcdTls> tls)
      : base_(base), tls_(std::move(tls)) {
    char tmpl[] = "/tmp/accel-etcd-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::string cluster;
    for (int i = 0; i < members; ++i) {
      cluster += (i ? "," : "") + name(i) + "=" + peerUrl(i);
    }
    for (int i = 0; i < members; ++i) pids_.push_back(startMember(i, cluster));
  }

  static std::string name(int member) { return "m" + std::to_string(member); }
  std::string peerUrl(int member) const {
    return "http://127.0.0.1:" + std::to_string(clientPort(member) + 1);
  }

  pid_t startMember(int member, const std::string& cluster) {
    const std::string client = (tls_ ? "https://" : "http://") + endpoint(member),
                      peer = peerUrl(member);
    std::vector<std::string> args = {kEtcdBinary,
                                     "--name",
                                     name(member),
                                     "--data-dir",
                                     dir_ + "/" + name(member),
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peer,
                                     "--initial-advertise-peer-urls",
                                     peer,
                                     "--initial-cluster",
                                     cluster,
                                     "--initial-cluster-state",
                                     "new",
                                     "--initial-cluster-token",
                                     "accel-test-" + std::to_string(::getpid())};
    if (tls_) {
      for (const char* a : {"--cert-file", "server.pem", "--key-file", "server.key",
                            "--trusted-ca-file", "ca.pem"}) {
        args.push_back(a[0] == '-' ? std::string(a) : tls_->file(a));
      }
      if (tls_->client_cert_auth) args.push_back("--client-cert-auth");
    }
    const std::string log = dir_ + "/" + name(member) + ".log";
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      ::execv(kEtcdBinary, argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Every member says it serves clients and a write goes through, within 30 s; else false, with
  // why (the logs' last lines). (A write alone would pass through another test's member on a
  // port this cluster failed to take.)
  bool ready(std::string& why) {
    EtcdOptions o;
    o.endpoints = *parseEtcdEndpoints(endpoints());
    if (tls_) (void)useTls(o.endpoints, true, tls_->client());
    o.timeout = o.attempt_timeout = std::chrono::milliseconds(500);
    EtcdClient client(o);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline && !exited) {
      bool serving = true;
      for (int i = 0; i < size(); ++i) {
        serving =
            serving && logTail(i, 0).find("ready to serve client requests") != std::string::npos;
      }
      try {
        if (serving) {
          client.put("accel-test/ready", "1");
          return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a look at the logs
      } catch (const std::exception&) {
      }
      for (pid_t pid : pids_) exited |= ::waitpid(pid, nullptr, WNOHANG) == pid;
    }
    why = "etcd (" + std::to_string(size()) + " member(s) from port " + std::to_string(base_) +
          ") did not answer:";
    for (int i = 0; i < size(); ++i) why += " [" + name(i) + "] " + logTail(i);
    return false;
  }

  // The last `bytes` of member's log (0: all of it).
  std::string logTail(int member, size_t bytes = 400) const {
    std::ifstream in(dir_ + "/" + name(member) + ".log");
    std::stringstream text;
    text << in.rdbuf();
    const std::string all = text.str();
    return bytes == 0 || all.size() <= bytes ? all : all.substr(all.size() - bytes);
  }

  const int base_;
  const std::optional<EtcdTls> tls_;
  std::string dir_;
  std::vector<pid_t> pids_;
};

// A test suite with one etcd member of its own (member_), started once for the suite; its tests
// are skipped, saying why, where etcd cannot run.
class EtcdSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    member_ = EtcdCluster::start(1, why).release();
    if (!member_) why_ = why;
  }
  static void TearDownTestSuite() {
    delete member_;
    member_ = nullptr;
  }
  void SetUp() override {
    if (!member_) GTEST_SKIP() << why_;
  }

  // One of the member's own counters or gauges, from its /metrics (a name with its labels, as
  // /metrics writes it: `grpc_server_started_total{grpc_method="LeaseKeepAlive",...}`).
  static double metric(const std::string& wanted) {
    const EtcdEndpoint e = parseEtcdEndpoints(member_->endpoint())->front();
    HttpConnection http(e.host, e.port);
    std::istringstream lines(
        http.get("/metrics", std::chrono::steady_clock::now() + std::chrono::seconds(2)).body);
    std::string name;
    double value = -1;
    while (lines >> name) {
      if (name == wanted && lines >> value) return value;
      lines.ignore(1 << 20, '\n');
    }
    ADD_FAILURE() << "etcd's /metrics has no " << wanted;
    return value;
  }

  inline static EtcdCluster* member_ = nullptr;
  inline static std::string why_;
};

}  // namespace accel::launcher::testing
