// etcd over TLS (--rdzv_conf protocol=https,cacert=...,cert=...,key=...): a real etcd member
// serving https with certificates openssl made for the test (tests/fixtures/tls/make_certs.sh),
// asking clients for theirs (--client-cert-auth). Requests and a watch go through; every way of
// getting TLS wrong is one error naming what is wrong. Skipped, saying why, where etcd cannot run
// or accel was built without OpenSSL.

#include <gtest/gtest.h>

#include "accel/error.h"
#include "etcd_member.h"
#include "launcher/rendezvous/etcd/client/etcd_client.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      TlsClient probe(TlsFiles{});
    } catch (const Error& e) {
      why_ = e.what();  // built without OpenSSL
      return;
    }
    if (!testing::makeTestCertificates(certs_.dir, why_)) return;
    certs_.client_cert_auth = true;
    member_ = testing::EtcdCluster::start(1, why_, certs_).release();
  }
  static void TearDownTestSuite() {
    delete member_;
    member_ = nullptr;
    std::error_code ignored;
    if (!certs_.dir.empty()) std::filesystem::remove_all(certs_.dir, ignored);
  }
  void SetUp() override {
    if (!member_) GTEST_SKIP() << why_;
  }

  // A client of the member (at `host`) over TLS with `files`; errors as the client's.
  static EtcdClient client(const TlsFiles& files, const std::string& host = "127.0.0.1") {
    EtcdOptions o;
    o.endpoints = *parseEtcdEndpoints(host + ":" + std::to_string(member_->clientPort(0)));
    auto ok = useTls(o.endpoints, true, files);
    if (!ok) throw Error(ok.error());
    o.timeout = o.attempt_timeout = 2s;
    return EtcdClient(o);
  }
  // What a call through `files` fails with ("" if it went through).
  static std::string failure(const TlsFiles& files) {
    try {
      client(files).get("tls/k");
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }
  static std::string file(const std::string& name) { return certs_.file(name); }

  inline static testing::EtcdTls certs_;
  inline static testing::EtcdCluster* member_ = nullptr;
  inline static std::string why_;
};

TEST_F(EtcdTlsTest, RequestsAndAWatchGoThroughWithTheRightCertificates) {
  EtcdClient c = client(certs_.client());
  c.put("tls/k", "1");
  EXPECT_EQ(c.get("tls/k")->value, "1");
  // By name too: the server's certificate names localhost.
  EXPECT_EQ(client(certs_.client(), "localhost").get("tls/k")->value, "1");
  // The key in the certificate's file, as torch's backends allow (cert= alone).
  EXPECT_EQ(client({file("ca.pem"), file("client-key-in-cert.pem"), ""}).get("tls/k")->value, "1");
  // A watch's stream over TLS sees a put after it.
  EtcdWatch watch(c.endpoint(), "tls/w", false, c.revision() + 1,
                  std::chrono::steady_clock::now() + 5s);
  c.put("tls/w", "seen");
  std::vector<EtcdEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (events.empty() && std::chrono::steady_clock::now() < deadline) {
    events = watch.next(std::chrono::steady_clock::now() + 200ms);
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kv.key, "tls/w");
  EXPECT_EQ(events[0].kv.value, "seen");
}

// The lease's renewals go over TLS too, on one gRPC stream (ALPN h2): etcd's counters, read over
// TLS, say one stream started and took them all.
TEST_F(EtcdTlsTest, RenewalsGoOnOneKeptGrpcStreamOverTls) {
  EtcdClient c = client(certs_.client());
  const int64_t lease = c.grantLease(5s);
  for (int i = 0; i < 3; ++i) EXPECT_GE(c.keepAlive(lease), 4);
  HttpConnection http(c.endpoint().host, c.endpoint().port, c.endpoint().tls);
  const std::string metrics = http.get("/metrics", std::chrono::steady_clock::now() + 2s).body;
  const std::string labels =
      R"({grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"})";
  EXPECT_NE(metrics.find("grpc_server_started_total" + labels + " 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("grpc_server_msg_received_total" + labels + " 3\n"), std::string::npos);
  c.revokeLease(lease);
}

TEST_F(EtcdTlsTest, AWrongCaIsRefusedNamingTheServersCertificate) {
  const std::string m = failure({file("other-ca.pem"), file("client.pem"), file("client.key")});
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(member_->clientPort(0)) +
                   ": TLS handshake failed: the server's certificate: "),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("issuer"), std::string::npos) << m;
}

// etcd asks for a client certificate (--client-cert-auth): without one, no request goes through.
TEST_F(EtcdTlsTest, NoClientCertificateIsRefused) {
  const std::string m = failure({file("ca.pem"), "", ""});
  // The alert's wording is the server's (etcd 3.4: "bad certificate"; 3.5: "certificate required").
  EXPECT_EQ(m.rfind("etcd at 127.0.0.1:" + std::to_string(member_->clientPort(0)) +
                        ": the server refused this client's TLS: ",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find(" alert "), std::string::npos) << m;
  EXPECT_NE(m.find("certificate"), std::string::npos) << m;
}

TEST_F(EtcdTlsTest, PlainHttpToATlsEndpointSaysSo) {
  EtcdOptions o;
  o.endpoints = *parseEtcdEndpoints(member_->endpoint());
  o.timeout = o.attempt_timeout = 2s;
  try {
    EtcdClient(o).get("tls/k");
    FAIL() << "plain HTTP went through";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("the server closed the connection without a reply (if it "
                                         "serves https: add protocol=https to --rdzv_conf)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(EtcdTlsTest, FilesThatCannotServeAreNamed) {
  auto error = [](const TlsFiles& files) {
    std::vector<EtcdEndpoint> e = *parseEtcdEndpoints("a");
    auto ok = useTls(e, true, files);
    return ok ? std::string() : ok.error();
  };
  EXPECT_EQ(error({"/no/ca.pem", "", ""})
                .rfind("cacert=/no/ca.pem: not a PEM CA certificate "
                       "that can be read: ",
                       0),
            0u)
      << error({"/no/ca.pem", "", ""});
  EXPECT_EQ(error({file("ca.pem"), "/no/cert.pem", ""})
                .rfind("cert=/no/cert.pem: not a PEM certificate that can be read: ", 0),
            0u);
  const std::string mismatch = error({file("ca.pem"), file("client.pem"), file("server.key")});
  EXPECT_EQ(
      mismatch.rfind(
          "key=" + file("server.key") + ": not the key of cert=" + file("client.pem") + ": ", 0),
      0u)
      << mismatch;
  EXPECT_EQ(error({file("ca.pem"), "", file("client.key")})
                .rfind("key=" + file("client.key") + ": a key without cert=", 0),
            0u);
  // No TLS asked for: nothing is read, nothing is set.
  std::vector<EtcdEndpoint> plain = *parseEtcdEndpoints("a");
  EXPECT_TRUE(useTls(plain, false, {"/no/ca.pem", "", ""}).ok());
  EXPECT_EQ(plain[0].tls, nullptr);
}

}  // namespace
}  // namespace accel::launcher
