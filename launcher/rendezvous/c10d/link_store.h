#pragma once
// LinkStore: what a round's link (c10d/job_link.h) needs of a connection to the job's store beyond
// store::Store — a wait whose end its thread can wait for among other descriptors (the watch),
// a way to cut a blocked call short from another thread, and bounds on calls and reconnections.
// TcpLinkStore is the TCP client's; tests use an in-memory one
// (tests/launcher/rendezvous/memory_link_store.h), watches included.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "libaccel/store/store.h"
#include "libaccel/store/tcp_store_client.h"

namespace accel::launcher {

class LinkStore : public store::Store {
 public:
  // Starts a wait for `keys` and returns a descriptor that becomes readable when they all exist
  // or the connection broke; then finishWait(). No other call in between.
  virtual int startWait(const std::vector<std::string>& keys) = 0;
  // Ends the wait; throws accel::NetworkError when the connection broke instead.
  virtual void finishWait() = 0;
  // A WAIT parked for good on a presence key (store::TcpStoreClient::park): the connection goes
  // on serving every call, and the agent counts present while it lives.
  virtual void park(const std::vector<std::string>& keys) = 0;
  // The only call that may come from another thread: the call blocked now and every later one
  // fail with accel::NetworkError (a reconnection try in progress, at its bound).
  virtual void interrupt() = 0;
  // Bounds every later call that takes no timeout of its own.
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;
  // Bounds a later reconnection (after a call that broke the connection): `total`, each try
  // `attempt`.
  virtual void setConnectTimeouts(std::chrono::milliseconds total,
                                  std::chrono::milliseconds attempt) = 0;
};

// The TCP client as a LinkStore.
class TcpLinkStore : public LinkStore {
 public:
  explicit TcpLinkStore(std::unique_ptr<store::TcpStoreClient> client)
      : client_(std::move(client)) {}

  void set(const std::string& key, const std::string& value) override { client_->set(key, value); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return client_->get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return client_->add(key, delta); }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    return client_->compareSet(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    client_->wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return client_->check(keys); }
  bool deleteKey(const std::string& key) override { return client_->deleteKey(key); }
  int64_t numKeys() override { return client_->numKeys(); }

  int startWait(const std::vector<std::string>& keys) override { return client_->startWait(keys); }
  void finishWait() override { client_->finishWait(); }
  void park(const std::vector<std::string>& keys) override { client_->park(keys); }
  void interrupt() override { client_->interrupt(); }
  void setTimeout(std::chrono::milliseconds timeout) override { client_->setTimeout(timeout); }
  void setConnectTimeouts(std::chrono::milliseconds total,
                          std::chrono::milliseconds attempt) override {
    client_->setConnectTimeouts(total, attempt);
  }

 private:
  std::unique_ptr<store::TcpStoreClient> client_;
};

}  // namespace accel::launcher
