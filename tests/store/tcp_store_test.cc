// The server and client together over real sockets, plus hostile clients on raw sockets.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "accel/error.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/wire_protocol.h"
#include "tests/store/raw_socket.h"

namespace accel::store {
namespace {

using namespace std::chrono_literals;

TcpStoreServerOptions loopback(int port) {
  TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  return o;
}

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = TcpStoreServer::start(serverOptions()); }
  virtual TcpStoreServerOptions serverOptions() { return {}; }

  std::unique_ptr<TcpStoreClient> client(std::chrono::milliseconds timeout = 5s) {
    TcpStoreClientOptions o;
    o.port = server_->port();
    o.connect_timeout = 2s;
    o.timeout = timeout;
    return std::make_unique<TcpStoreClient>(o);
  }

  // A raw socket to the server, for speaking bytes that no well-behaved client would.
  int rawSocket(int receiveBuffer = 0) {
    int fd = testing::connectLoopback(server_->port(), receiveBuffer);
    EXPECT_GE(fd, 0);
    return fd;
  }

  // True when the server closed `fd` (read returns 0) within a second.
  static bool closedByServer(int fd) {
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreTest, SetGetAddCompareSetDeleteNumKeys) {
  auto c = client();
  c->set("a", std::string("x\0y", 3));
  EXPECT_EQ(c->get("a"), std::string("x\0y", 3));
  EXPECT_EQ(c->add("n", 5), 5);
  EXPECT_EQ(c->add("n", -2), 3);
  EXPECT_EQ(c->get("n"), "3");
  EXPECT_EQ(c->compareSet("a", "wrong", "z"), std::string("x\0y", 3));
  EXPECT_EQ(c->compareSet("a", std::string("x\0y", 3), "z"), "z");
  EXPECT_EQ(c->compareSet("fresh", "", "first"), "first");
  EXPECT_EQ(c->compareSet("absent", "expected", "d"), "expected");  // torch 1.13's answer
  EXPECT_FALSE(c->check({"absent"}));
  EXPECT_TRUE(c->check({"a", "n"}));
  EXPECT_EQ(c->numKeys(), 3);
  EXPECT_TRUE(c->deleteKey("a"));
  EXPECT_FALSE(c->deleteKey("a"));
  EXPECT_EQ(c->numKeys(), 2);
}

TEST_F(TcpStoreTest, WaitIsParkedUntilTheLastKeyAppears) {
  auto waiter = client();
  auto setter = client();
  auto done = std::async(std::launch::async, [&] { waiter->wait({"x", "y"}, 5s); });
  EXPECT_EQ(done.wait_for(100ms), std::future_status::timeout);
  setter->set("x", "1");
  EXPECT_EQ(done.wait_for(100ms), std::future_status::timeout);
  setter->add("y", 1);
  EXPECT_EQ(done.wait_for(2s), std::future_status::ready);
  done.get();
}

// startWait/finishWait: the descriptor becomes readable when the key is set, or when the store
// goes away (then finishWait throws) — what an agent's event loop watches for a job failure.
TEST_F(TcpStoreTest, AsynchronousWaitWakesOnTheKeyOrOnTheStoreGoingAway) {
  auto watcher = client();
  auto writer = client();
  pollfd p{watcher->startWait({"failure"}), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 50), 0);  // not yet
  writer->set("failure", "rank 3");
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  watcher->finishWait();
  EXPECT_EQ(watcher->get("failure"), "rank 3");

  p.fd = watcher->startWait({"never"});
  server_->stop();
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  EXPECT_THROW(watcher->finishWait(), NetworkError);
}

TEST_F(TcpStoreTest, GetTimesOutNamingKeyAddressAndProgress) {
  auto c = client();
  c->set("present", "1");
  try {
    c->wait({"present", "missing"}, 200ms);
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "waited 0.2 s for keys [present, missing] on the store at 127.0.0.1:" +
                  std::to_string(server_->port()) + "; still missing [missing] (1/2 present)");
  }
  // The client recovers (a fresh connection) and the late key still arrives for others.
  c->set("missing", "now");
  EXPECT_EQ(c->get("missing"), "now");
}

TEST_F(TcpStoreTest, ConnectFailureNamesAddress) {
  int port = server_->port();
  server_.reset();
  TcpStoreClientOptions o;
  o.port = port;
  o.connect_timeout = 100ms;
  try {
    TcpStoreClient c(o);
    FAIL() << "connected to a stopped server";
  } catch (const NetworkError& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("cannot connect to the store at 127.0.0.1:" + std::to_string(port) +
                          " within 0.1 s",
                      0),
              0u)
        << m;
    EXPECT_NE(m.find("Connection refused"), std::string::npos) << m;
  }
}

// A listener whose accept queue is full drops every SYN: a path that loses packets. Returns the
// listener's port; `listener` and `queued` (the connection that fills the queue) to close.
int blackholedPort(int& listener, int& queued) {
  listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listener, 0) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  const int port = ntohs(a.sin_port);
  queued = testing::connectLoopback(port, 0);
  return port;
}

// Each try of a connection is bounded: where SYNs vanish, a blocking connect() would wait out the
// kernel's retries (over two minutes); the client gives up at connect_timeout, and with
// connect_attempt_timeout it tries afresh that often (a path that comes back is used at once).
TEST(TcpStoreClientConnect, TriesAreBoundedWhereSynsVanish) {
  int listener = -1, queued = -1;
  const int port = blackholedPort(listener, queued);
  ASSERT_GT(port, 0);
  ASSERT_GE(queued, 0);
  TcpStoreClientOptions o;
  o.port = port;
  o.connect_timeout = 600ms;
  for (auto attempt : {0ms, 100ms}) {
    o.connect_attempt_timeout = attempt;
    try {
      TcpStoreClient c(o);
      FAIL() << "connected through a full accept queue";
    } catch (const NetworkError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("within 0.6 s"), std::string::npos) << m;
      EXPECT_NE(m.find("last error: no answer"), std::string::npos) << m;
      const int attempts = std::stoi(m.substr(m.find(" (") + 2));
      if (attempt == 0ms) {
        EXPECT_EQ(attempts, 1) << m;  // one try, cut at connect_timeout
      } else {
        EXPECT_GE(attempts, 4) << m;  // about 6 tries of 100 ms
      }
    }
  }
  ::close(queued);
  ::close(listener);
}

TEST_F(TcpStoreTest, UnknownQueryTypeDropsOnlyThatClient) {
  auto good = client();
  int bad = rawSocket();
  ASSERT_EQ(::send(bad, "\x42", 1, 0), 1);
  EXPECT_TRUE(closedByServer(bad));
  ::close(bad);
  good->set("still", "fine");
  EXPECT_EQ(good->get("still"), "fine");
  EXPECT_GE(server_->stats().connections_dropped, 1u);
}

TEST_F(TcpStoreTest, AbsurdLengthDropsTheClient) {
  int bad = rawSocket();
  std::string frame(1, '\x00');  // SET with a key of 2^60 bytes
  wire::putUint64(frame, 1ull << 60);
  ASSERT_EQ(::send(bad, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  EXPECT_TRUE(closedByServer(bad));
  ::close(bad);
  EXPECT_EQ(client()->add("alive", 1), 1);
}

TEST_F(TcpStoreTest, ClientsVanishingMidFrameAndMidWaitLeaveNoTrace) {
  for (int i = 0; i < 50; ++i) {
    int fd = rawSocket();
    wire::Request q;
    q.op = wire::Op::Set;
    q.keys = {"/half"};
    q.value = std::string(1000, 'v');
    std::string bytes = wire::encodeRequest(wire::Generation::Legacy, q);
    ASSERT_GT(::send(fd, bytes.data(), bytes.size() / 2, 0), 0);  // half a frame, then gone
    ::close(fd);
    int waiter = rawSocket();
    q = {};
    q.op = wire::Op::Wait;
    q.keys = {"/never"};
    bytes = wire::encodeRequest(wire::Generation::Legacy, q);
    ASSERT_GT(::send(waiter, bytes.data(), bytes.size(), 0), 0);  // parked, then gone
    ::close(waiter);
  }
  auto c = client();
  EXPECT_FALSE(c->check({"half"}));
  c->set("never", "now");  // wakes 50 dead waiters: must not crash or send to closed sockets
  EXPECT_EQ(c->get("never"), "now");
  for (int i = 0; i < 100 && server_->stats().connections_accepted < 101; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server_->stats().connections_accepted, 101u);
}

class SlowReaderTest : public TcpStoreTest {
  TcpStoreServerOptions serverOptions() override {
    TcpStoreServerOptions o;
    o.max_pending_output_bytes = 1 << 20;
    return o;
  }
};

TEST_F(SlowReaderTest, AReaderThatNeverReadsIsDroppedNotBuffered) {
  auto c = client();
  c->set("big", std::string(256 * 1024, 'b'));
  ASSERT_EQ(c->get("big").size(), 256u * 1024);  // stored before the slow reader asks
  int slow = rawSocket(4096);
  wire::Request q;
  q.op = wire::Op::Get;
  q.keys = {"/big"};
  std::string get = wire::encodeRequest(wire::Generation::Legacy, q);
  std::string many;
  for (int i = 0; i < 128; ++i) many += get;  // asks for 32 MiB of replies, reads none
  ASSERT_EQ(::send(slow, many.data(), many.size(), 0), static_cast<ssize_t>(many.size()));
  for (int i = 0; i < 200 && server_->stats().connections_dropped == 0; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server_->stats().connections_dropped, 1u);
  ::close(slow);
  EXPECT_EQ(c->get("big").size(), 256u * 1024);
}

class ClientGenerationTest : public TcpStoreTest,
                             public ::testing::WithParamInterface<wire::Generation> {};

TEST_P(ClientGenerationTest, EveryCallInEveryGenerationAndCancelledWaitsKeepTheConnection) {
  TcpStoreClientOptions o;
  o.port = server_->port();
  o.timeout = 5s;
  o.generation = GetParam();
  TcpStoreClient c(o);
  EXPECT_EQ(c.generation(), GetParam());
  c.set("k", "v");
  EXPECT_EQ(c.get("k"), "v");
  EXPECT_EQ(c.add("n", 2), 2);
  EXPECT_EQ(c.compareSet("k", "v", "w"), "w");
  EXPECT_TRUE(c.check({"k", "n"}));
  EXPECT_EQ(c.numKeys(), 2);
  EXPECT_TRUE(c.deleteKey("n"));
  EXPECT_FALSE(c.deleteKey("n"));
  const uint64_t accepted = server_->stats().connections_accepted;
  EXPECT_THROW(c.wait({"never"}, 50ms), TimeoutError);
  EXPECT_EQ(c.get("k"), "w");
  // Legacy cannot cancel a wait and replaces its connection; the others keep theirs.
  EXPECT_EQ(server_->stats().connections_accepted - accepted,
            GetParam() == wire::Generation::Legacy ? 1u : 0u);
  if (GetParam() != wire::Generation::Legacy) {
    EXPECT_EQ(server_->stats().parked_waits, 0u);  // cancelled, not left parked
  }
}

INSTANTIATE_TEST_SUITE_P(Generations, ClientGenerationTest,
                         ::testing::Values(wire::Generation::Legacy, wire::Generation::Torch21,
                                           wire::Generation::Validated));

TEST_F(TcpStoreTest, TheClientProbesOurServerAsValidated) {
  auto c = client();
  EXPECT_EQ(c->generation(), wire::Generation::Validated);
  // Stats are published after each pass over the loop's events: a later request's reply means
  // the pass that handled the probe has been published.
  EXPECT_EQ(c->numKeys(), 0);
  EXPECT_EQ(server_->stats().validated_connections, 1u);
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
}

class LoggedStoreTest : public TcpStoreTest {
 protected:
  TcpStoreServerOptions serverOptions() override {
    TcpStoreServerOptions o;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(line);
    };
    return o;
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST_F(LoggedStoreTest, BytesOfNoProtocolCloseAtOnceWithOneLineNamingPeerAndBytes) {
  auto good = client();
  int http = rawSocket();
  sockaddr_in local{};
  socklen_t len = sizeof local;
  ::getsockname(http, reinterpret_cast<sockaddr*>(&local), &len);
  ASSERT_EQ(::send(http, "GET / HTTP/1.1\r\n", 16, 0), 16);
  EXPECT_TRUE(closedByServer(http));
  ::close(http);
  // A validated (torch 2.2+) connection sending a code no release has.
  int validated = rawSocket();
  std::string bytes = std::string("\x00\xce\xf7\x85\x3c", 5) + "\x63";
  ASSERT_EQ(::send(validated, bytes.data(), bytes.size(), 0), 6);
  EXPECT_TRUE(closedByServer(validated));
  ::close(validated);
  good->set("still", "fine");
  EXPECT_EQ(good->get("still"), "fine");
  auto logged = lines();
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_EQ(logged[0],
            "closing the connection from 127.0.0.1:" + std::to_string(ntohs(local.sin_port)) +
                ": first query code 71 is neither torch 2.2+'s VALIDATE nor a torch 1.13-2.1 "
                "query; not a "
                "TCPStore client (bytes: 47 45 54 20 2f 20 48 54 54 50 2f 31 2e 31 0d 0a)");
  EXPECT_NE(
      logged[1].find(
          ": unknown query code 99 for the validated (torch 2.2 - 2.14) protocol (bytes: 63)"),
      std::string::npos)
      << logged[1];
  EXPECT_EQ(server_->stats().protocol_errors, 2u);
  EXPECT_EQ(server_->stats().validated_connections, 2u);  // ours (the probe) and the bad one
}

TEST_F(TcpStoreTest, ClearKeysKeepsTheAgentsKeysAndParkedWaits) {
  auto c = client();
  c->set("accel/rdzv/job/agent/0", "a");
  c->set("default_pg/0", "stale");
  c->add("worker/attempt_0/x", 1);
  auto waiter = client();
  int fd = waiter->startWait({"later"});
  c->set("sync",
         "1");  // this connection's requests are handled in order: the WAIT is parked by now
  ASSERT_TRUE(c->check({"sync"}));
  EXPECT_EQ(server_->clearKeysExcept({"/accel/"}), 3u);
  EXPECT_TRUE(c->check({"accel/rdzv/job/agent/0"}));
  EXPECT_FALSE(c->check({"default_pg/0"}));
  EXPECT_EQ(c->add("worker/attempt_0/x", 0), 0);  // gone: counts from 0 again
  // The WAIT parked before the clear is still answered when its key appears.
  c->set("later", "1");
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  waiter->finishWait();
}

TEST(TcpStoreServerTest, BindsOnlyTheAddressGiven) {
  auto server = TcpStoreServer::start(loopback(0));
  // Another loopback address (127.0.0.2 is loopback too) must not reach it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server->port()));
  ::inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);
}

TEST(TcpStoreServerTest, TakenPortIsAnErrorNamingIt) {
  auto first = TcpStoreServer::start(loopback(0));
  try {
    TcpStoreServer::start(loopback(first->port()));
    FAIL() << "bound a taken port";
  } catch (const AddressInUseError& e) {  // its own type: an agent may then join as a client
    EXPECT_EQ(std::string(e.what()),
              "TCPStore server: cannot listen on 127.0.0.1:" + std::to_string(first->port()) +
                  ": Address already in use");
  }
}

TEST(TcpStoreServerTest, ManyClientsReachABarrier) {
  auto server = TcpStoreServer::start({});
  constexpr int kClients = 64;
  std::vector<std::thread> threads;
  std::atomic<int> through{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      TcpStoreClientOptions o;
      o.port = server->port();
      TcpStoreClient c(o);
      if (c.add("arrived", 1) == kClients) c.set("go", "1");
      c.wait({"go"}, 10s);
      ++through;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(through.load(), kClients);
}

// A client that parks a WAIT on a presence key is present while its connection lives, and
// absent once it closes (an agent whose process died): known from the published snapshot,
// without a keep-alive window. Keys outside the prefix are not presence keys.
class PresenceTest : public TcpStoreTest {
 protected:
  TcpStoreServerOptions serverOptions() override {
    TcpStoreServerOptions o;
    o.presence_key_prefix = "/here/";
    return o;
  }
  // Until the loop published `parked` parked WAITs (presence is published with the counters).
  bool parked(uint64_t n) {
    return server_->awaitStats([n](const TcpStoreServerStats& s) { return s.parked_waits == n; },
                               5s);
  }
};

TEST_F(PresenceTest, AParkedWaitIsPresenceUntilItsConnectionCloses) {
  EXPECT_FALSE(server_->waiting("/here/a"));
  auto a = client(), b = client(), other = client();
  a->startWait({"here/a"});
  b->startWait({"here/b"});
  other->startWait({"elsewhere/c"});
  ASSERT_TRUE(parked(3));  // published with the counters of the pass that parked them
  EXPECT_TRUE(server_->waiting("/here/a"));
  EXPECT_TRUE(server_->waiting("/here/b"));
  EXPECT_FALSE(server_->waiting("/elsewhere/c"));  // not under the prefix
  a.reset();                                       // its process died: the socket closes
  ASSERT_TRUE(parked(2));
  EXPECT_FALSE(server_->waiting("/here/a"));
  EXPECT_TRUE(server_->waiting("/here/b"));
  client()->set("here/b", "x");  // a presence key that is set ends its wait, like any other
  ASSERT_TRUE(parked(1));
  EXPECT_FALSE(server_->waiting("/here/b"));
  EXPECT_FALSE(server_->waiting("/here/b", 50ms));  // nobody parks it again within the grace
}

// Presence parked on a connection that goes on serving (an agent's one connection): its other
// calls, a wait of its own that times out (the client's CANCEL_WAIT ends that wait, not the
// presence) and one that is answered all leave it present; a park again with another key
// replaces it (the client reconnects: the old one goes with its connection); closing ends it.
TEST_F(PresenceTest, PresenceParkedOnABusyConnectionLastsUntilItCloses) {
  auto a = client();
  a->park({"here/a"});
  a->set("k", "v");
  EXPECT_EQ(a->get("k", 1s), "v");
  EXPECT_THROW(a->get("never", 50ms), TimeoutError);  // then CANCEL_WAIT
  ASSERT_TRUE(parked(1));
  EXPECT_TRUE(server_->waiting("/here/a"));
  std::thread later([this] { client()->set("soon", "1"); });
  a->wait({"soon"}, 5s);
  later.join();
  EXPECT_EQ(a->add("n", 2), 2);
  ASSERT_TRUE(parked(1));
  EXPECT_TRUE(server_->waiting("/here/a"));
  a->park({"here/a2"});
  EXPECT_TRUE(server_->waiting("/here/a2", 2s));
  ASSERT_TRUE(server_->awaitPresentAtMost(1, 5s));
  EXPECT_FALSE(server_->waiting("/here/a"));
  EXPECT_EQ(a->get("k", 1s), "v");  // the new connection is in step
  a.reset();
  ASSERT_TRUE(parked(0));
  EXPECT_FALSE(server_->waiting("/here/a2"));
}

// An endpoint where another kind of server listens (an HTTP server answering 400 and keeping the
// connection): its bytes read as a length (after the first, read as a status) are not taken for
// one, and the error says what they look like.
TEST(TcpStoreClientTest, AnotherKindOfServerIsNamedAsSuch) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread http([listener] {
    const int c = ::accept(listener, nullptr, nullptr);
    char request[4096];
    (void)::recv(c, request, sizeof request, 0);
    const std::string answer = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
    (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    char rest[4096];
    while (::recv(c, rest, sizeof rest, 0) > 0) {
    }
    ::close(c);
  });
  TcpStoreClientOptions o;
  o.port = ntohs(a.sin_port);
  o.generation = wire::Generation::Validated;
  o.timeout = 5s;
  {
    TcpStoreClient c(o);
    try {
      c.get("accel/job_id");
      FAIL() << "an HTTP server's answer was taken for a value";
    } catch (const NetworkError& e) {
      EXPECT_EQ(std::string(e.what()),
                "get 'accel/job_id': what listens at 127.0.0.1:" + std::to_string(o.port) +
                    " is no TCPStore: it sent a value of 2319686071854584916 bytes (\"TTP/1.1 \" "
                    "as text: another kind of server?)");
    }
  }
  http.join();
  ::close(listener);
}

}  // namespace
}  // namespace accel::store
