#include "launcher/rendezvous/etcd/store.h"

#include "accel/error.h"
#include "launcher/rendezvous/round/stored_number.h"

namespace accel::launcher {

EtcdStore::EtcdStore(EtcdOptions options, std::string prefix, const EtcdAccess& access)
    : clock_(access.clock),
      client_(access.connect(options)),
      prefix_(prefix.empty() ? "" : std::move(prefix) + "/") {}

void EtcdStore::set(const std::string& key, const std::string& value) {
  client_->put(full(key), value);
}

// One read when the key is there; else its value as the watch saw it put.
std::string EtcdStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  if (auto value = awaitKey(key, clock_->now() + timeout)) return *value;
  throw timedOut(key, timeout);
}

// A compare-and-swap on the value read, again until no other agent wrote in between — for at
// most the client's timeout in all.
int64_t EtcdStore::add(const std::string& key, int64_t delta) {
  const auto deadline = clock_->now() + client_->timeout();
  for (int tries = 1;; ++tries) {
    if (clock_->now() >= deadline) {
      throw TimeoutError("add to '" + key + "' on etcd at " + client_->endpointInUse() + ": " +
                         std::to_string(tries - 1) + " tries in " +
                         std::to_string(client_->timeout().count()) +
                         " ms, each lost to another writer");
    }
    const auto kv = client_->get(full(key));
    const int64_t was = kv ? storedNumber(full(key), kv->value) : 0;
    if (delta == 0 && kv) return was;  // a read (it writes only when absent)
    const int64_t now = was + delta;
    if (client_->compareAndSwap(full(key), kv ? kv->mod_revision : 0, std::to_string(now))) {
      return now;
    }
  }
}

// torch's semantics (store.h): an absent key with a non-empty `expected` answers `expected`.
std::string EtcdStore::compareSet(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  const auto now = client_->compareValueAndSet(full(key), expected, desired);
  return now ? now->value : expected;
}

void EtcdStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = clock_->now() + timeout;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (awaitKey(keys[i], deadline)) continue;
    std::string missing;
    for (size_t j = i; j < keys.size(); ++j) {
      if (!client_->get(full(keys[j]))) missing += (missing.empty() ? "" : ", ") + keys[j];
    }
    throw timedOut(missing, timeout);
  }
}

TimeoutError EtcdStore::timedOut(const std::string& missing,
                                 std::chrono::milliseconds timeout) const {
  return TimeoutError("wait for " + missing + " timed out after " +
                      std::to_string(timeout.count()) + " ms on etcd at " +
                      client_->endpointInUse());
}

// `key`'s value once it exists, nullopt if not by `deadline`: read it; missing, watch it from the
// revision after that read (so a put in between is seen), on the endpoint that answered; a watch
// that ends (its endpoint gone) is opened again after another read, wherever the client then
// reaches.
std::optional<std::string> EtcdStore::awaitKey(const std::string& key, Clock::time_point deadline) {
  while (true) {
    if (auto kv = client_->get(full(key))) return kv->value;
    if (clock_->now() >= deadline) return std::nullopt;
    try {
      ++watches_;
      auto watch = client_->watch(full(key), false, client_->revision() + 1, deadline);
      while (clock_->now() < deadline) {
        for (const auto& e : watch->next(deadline)) {
          if (!e.deleted) return e.kv.value;
        }
      }
      return std::nullopt;
    } catch (const NetworkError&) {
      if (clock_->now() >= deadline) return std::nullopt;
    }
  }
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    if (!client_->get(full(k))) return false;
  }
  return true;
}

bool EtcdStore::deleteKey(const std::string& key) { return client_->remove(full(key)); }

int64_t EtcdStore::numKeys() { return client_->countPrefix(prefix_); }

std::vector<std::optional<std::string>> EtcdStore::present(const std::vector<std::string>& keys) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const auto& k : keys) full_keys.push_back(full(k));
  std::vector<std::optional<std::string>> out;
  for (auto& kv : client_->getMany(full_keys)) {
    out.push_back(kv ? std::optional<std::string>(std::move(kv->value)) : std::nullopt);
  }
  return out;
}

}  // namespace accel::launcher
