#include "launcher/store/store_state.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <unordered_set>

namespace accel::store {

using wire::Op;

namespace {

std::string byteReply(uint8_t b) {
  std::string out;
  wire::putByte(out, b);
  return out;
}

std::string int64Reply(int64_t v) {
  std::string out;
  wire::putInt64(out, v);
  return out;
}

std::string bytesReply(const std::string& v) {
  std::string out;
  wire::putBytes(out, v);
  return out;
}

}  // namespace

void StoreState::execute(uint64_t conn, const wire::Request& q) {
  const std::string& key = q.keys.empty() ? std::string() : q.keys.front();
  switch (q.op) {
    case Op::Validate:  // checked by the loop when it told the generation; no reply
      return;
    case Op::Ping: {
      std::string reply;
      wire::putUint32(reply, q.word);
      return send_(conn, reply);
    }
    case Op::Set:
      return store(key, q.value);
    case Op::CompareSet:
      return send_(conn, bytesReply(compareSet(q)));
    case Op::Get: {
      // Clients WAIT first; a missing key reads as empty, as in torch's libuv server.
      auto it = data_.find(key);
      return send_(conn, bytesReply(it == data_.end() ? std::string() : it->second));
    }
    case Op::Add:
      return send_(conn, int64Reply(add(key, q.delta)));
    case Op::Check: {
      const bool all =
          std::all_of(q.keys.begin(), q.keys.end(), [this](const auto& k) { return exists(k); });
      return send_(conn, byteReply(static_cast<uint8_t>(all ? wire::CheckResponse::Ready
                                                            : wire::CheckResponse::NotReady)));
    }
    case Op::Wait:
      return wait(conn, q.keys);
    case Op::CancelWait:
      // Any STOP_WAITING already sent stays ahead of this reply; torch's client reads both.
      // A client gives up its waits, not the presence it parked on the same connection.
      cancelWaits(conn, /*keepPresence=*/true);
      return send_(conn, byteReply(static_cast<uint8_t>(wire::WaitResponse::WaitCanceled)));
    case Op::GetNumKeys:
      return send_(conn, int64Reply(static_cast<int64_t>(data_.size())));
    case Op::WatchKey:
      // One subscription per connection and key. torch 1.13's server appends the socket again
      // on each WATCH_KEY and notifies it once per entry, but its client keeps one callback
      // per key (a repeat replaces it), so a second entry only ran that callback twice: here a
      // repeat is answered and changes nothing, and a client looping on it cannot grow us.
      if (watchers_[key].insert(conn).second) conn_watches_[conn].insert(key);
      return send_(conn, byteReply(static_cast<uint8_t>(wire::WatchResponse::KeyCallbackResponse)));
    case Op::DeleteKey:
      return send_(conn, int64Reply(deleteKey(key)));
    case Op::Append:
      return append(key, q.value);
    case Op::MultiGet: {
      std::string reply;
      for (const auto& k : q.keys) {
        auto it = data_.find(k);
        wire::putBytes(reply, it == data_.end() ? std::string() : it->second);
      }
      return send_(conn, reply);
    }
    case Op::MultiSet:
      for (size_t i = 0; i < q.keys.size(); ++i) store(q.keys[i], q.values[i]);
      return;
    case Op::QueuePush:
      // As torch's server: a push wakes one waiter (a blocking pop WAITs on the queue's key).
      queues_[key].push_back(q.value);
      return wakeOne(key);
    case Op::QueuePop:
      return send_(conn, queuePop(key));
    case Op::QueueLen: {
      auto it = queues_.find(key);
      return send_(conn,
                   int64Reply(it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size())));
    }
    case Op::ListKeys:
      return send_(conn, listKeys());
    case Op::Barrier:
      return barrier(conn, key, q.delta);
  }
}

bool StoreState::exists(const std::string& key) const {
  if (data_.count(key)) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

void StoreState::store(const std::string& key, std::string value) {
  auto it = data_.find(key);
  if (it == data_.end()) {
    auto& stored = data_.emplace(key, std::move(value)).first->second;
    notifyWatchers(key, wire::WatchResponse::KeyCreated, "", stored);
    keyCreated(key);
  } else {
    std::string old = std::move(it->second);
    it->second = std::move(value);
    notifyWatchers(key, wire::WatchResponse::KeyUpdated, old, it->second);
  }
  if (!observers_.empty()) written(key, data_.find(key)->second);
}

std::string StoreState::compareSet(const wire::Request& q) {
  // torch's semantics, including its answer for a missing key with a non-empty expected value
  // (it returns the expected value and stores nothing).
  const std::string& key = q.keys.front();
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (!q.value.empty()) return q.value;
    store(key, q.desired);
    return q.desired;
  }
  if (it->second == q.value) store(key, q.desired);
  return data_.at(key);
}

int64_t StoreState::add(const std::string& key, int64_t delta) {
  int64_t value = delta;
  auto it = data_.find(key);
  if (it != data_.end()) {
    errno = 0;
    char* end = nullptr;
    long long current = std::strtoll(it->second.c_str(), &end, 10);
    // Wraps around on overflow as two's complement (torch's servers add with signed overflow,
    // undefined behaviour that wraps in practice); never undefined here.
    if (!it->second.empty() && *end == '\0' && errno == 0) {
      value = static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(delta));
    }
  }
  store(key, std::to_string(value));
  return value;
}

void StoreState::wait(uint64_t conn, const std::vector<std::string>& keys) {
  // Linear in the keys (a WAIT may list a million): each distinct missing key once.
  std::vector<std::string> missing;
  std::unordered_set<std::string_view> seen;
  for (const auto& k : keys) {
    if (!exists(k) && seen.insert(k).second) missing.push_back(k);
  }
  if (missing.empty()) {
    send_(conn, byteReply(static_cast<uint8_t>(wire::WaitResponse::StopWaiting)));
    return;
  }
  park(conn, missing);
}

int64_t StoreState::deleteKey(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return 0;
  std::string old = std::move(it->second);
  data_.erase(it);
  notifyWatchers(key, wire::WatchResponse::KeyDeleted, old, "");
  return 1;
}

void StoreState::append(const std::string& key, const std::string& value) {
  auto it = data_.find(key);
  if (it == data_.end()) return store(key, value);
  std::string old = it->second;
  it->second += value;
  notifyWatchers(key, wire::WatchResponse::KeyUpdated, old, it->second);
  written(key, it->second);
}

std::string StoreState::queuePop(const std::string& key) {
  // The queue's length before the pop, then (if it was not empty) the oldest value. torch's
  // clients WAIT for the queue's key first when they block, and raise on an empty answer.
  auto it = queues_.find(key);
  if (it == queues_.end() || it->second.empty()) return int64Reply(0);
  std::string reply = int64Reply(static_cast<int64_t>(it->second.size()));
  wire::putBytes(reply, it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  return reply;
}

std::string StoreState::listKeys() const {
  std::string reply = int64Reply(static_cast<int64_t>(data_.size()));
  for (const auto& [key, value] : data_) wire::putBytes(reply, key);
  return reply;
}

void StoreState::barrier(uint64_t conn, const std::string& key, int64_t worldSize) {
  // torch 2.12's BARRIER: the arrivals are counted in the key itself (as ADD does); the last
  // one releases everybody parked on it, itself included.
  if (add(key, 1) < worldSize) {
    barriers_[key].push_back(conn);
    return;
  }
  std::vector<uint64_t> parked;
  if (auto it = barriers_.find(key); it != barriers_.end()) {
    parked = std::move(it->second);
    barriers_.erase(it);
  }
  parked.push_back(conn);
  for (uint64_t c : parked)
    send_(c, byteReply(static_cast<uint8_t>(wire::WaitResponse::StopWaiting)));
}

void StoreState::wakeOne(const std::string& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end() || it->second.empty()) return;
  const uint64_t id = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) waiting_.erase(it);
  countWaiters(key, -1);
  keyArrived(id);
}

void StoreState::keyCreated(const std::string& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiting_.erase(it);
  countWaiters(key, -static_cast<long>(ids.size()));
  for (uint64_t id : ids) keyArrived(id);
}

void StoreState::keyArrived(uint64_t id) {
  auto w = waiters_.find(id);
  if (w == waiters_.end() || --w->second.missing > 0) return;
  const uint64_t conn = w->second.conn;
  unpark(id);
  ++woken_waits_;
  send_(conn, byteReply(static_cast<uint8_t>(wire::WaitResponse::StopWaiting)));
}

void StoreState::notifyWatchers(const std::string& key, wire::WatchResponse event,
                                const std::string& oldValue, const std::string& newValue) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  std::string message;
  wire::putByte(message, static_cast<uint8_t>(event));
  wire::putBytes(message, key);
  wire::putBytes(message, oldValue);
  wire::putBytes(message, newValue);
  const std::set<uint64_t> conns = it->second;  // a send may drop a connection (and unwatch)
  for (uint64_t conn : conns) send_(conn, message);
}

bool StoreState::isPresenceKey(const std::string& key) const {
  return !presence_prefix_.empty() &&
         key.compare(0, presence_prefix_.size(), presence_prefix_) == 0;
}

void StoreState::countWaiters(const std::string& key, long count) {
  if (count == 0) return;
  if (tracked(key)) tracked_waits_ += static_cast<size_t>(count);  // wraps back for negatives
  if (!isPresenceKey(key)) return;
  size_t& n = presence_[key];
  const bool before = n > 0;
  n += static_cast<size_t>(count);
  if (n == 0) presence_.erase(key);
  if (before != (n > 0)) ++presence_version_;
}

std::vector<std::string> StoreState::presentKeys() const {
  std::vector<std::string> keys;
  keys.reserve(presence_.size());
  for (const auto& [key, n] : presence_) keys.push_back(key);
  return keys;
}

void StoreState::park(uint64_t conn, const std::vector<std::string>& keys) {
  const uint64_t id = next_waiter_++;
  waiters_[id] = Waiter{conn, keys, keys.size()};
  conn_waiters_[conn].push_back(id);
  for (const auto& k : keys) {
    waiting_[k].push_back(id);
    countWaiters(k, 1);
  }
}

// Forgets a waiter everywhere it is referenced.
void StoreState::unpark(uint64_t id) {
  auto w = waiters_.find(id);
  if (w == waiters_.end()) return;
  for (const auto& k : w->second.missing_keys) {
    auto list = waiting_.find(k);
    if (list == waiting_.end()) continue;
    auto& ids = list->second;
    const auto removed = std::remove(ids.begin(), ids.end(), id);
    countWaiters(k, -static_cast<long>(ids.end() - removed));
    ids.erase(removed, ids.end());
    if (ids.empty()) waiting_.erase(list);
  }
  auto mine = conn_waiters_.find(w->second.conn);
  if (mine != conn_waiters_.end()) {
    auto& ids = mine->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) conn_waiters_.erase(mine);
  }
  waiters_.erase(w);
}

void StoreState::cancelWaits(uint64_t conn, bool keepPresence) {
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    auto& conns = it->second;
    conns.erase(std::remove(conns.begin(), conns.end(), conn), conns.end());
    it = conns.empty() ? barriers_.erase(it) : std::next(it);
  }
  auto mine = conn_waiters_.find(conn);
  if (mine == conn_waiters_.end()) return;
  const std::vector<uint64_t> ids = mine->second;
  for (uint64_t id : ids) {
    const auto& keys = waiters_.at(id).missing_keys;
    const bool presence = std::all_of(keys.begin(), keys.end(),
                                      [this](const std::string& k) { return isPresenceKey(k); });
    if (!(keepPresence && presence)) unpark(id);
  }
}

void StoreState::disconnect(uint64_t conn) {
  cancelWaits(conn, /*keepPresence=*/false);
  auto watched = conn_watches_.find(conn);
  if (watched == conn_watches_.end()) return;
  for (const auto& key : watched->second) {
    auto it = watchers_.find(key);
    if (it == watchers_.end()) continue;
    it->second.erase(conn);
    if (it->second.empty()) watchers_.erase(it);
  }
  conn_watches_.erase(watched);
}

namespace {
// Erases the entries of `map` whose key `kept` rejects; returns how many.
template <typename Map, typename Pred>
size_t eraseUnless(Map& map, const Pred& kept) {
  size_t removed = 0;
  for (auto it = map.begin(); it != map.end();) {
    if (kept(it->first)) {
      ++it;
    } else {
      it = map.erase(it);
      ++removed;
    }
  }
  return removed;
}
}  // namespace

size_t StoreState::clearExcept(const std::vector<std::string>& keep) {
  auto kept = [&keep](const std::string& key) {
    return std::any_of(keep.begin(), keep.end(),
                       [&key](const std::string& p) { return key.rfind(p, 0) == 0; });
  };
  return eraseUnless(data_, kept) + eraseUnless(queues_, kept);
}

size_t StoreState::watchCount() const {
  size_t n = 0;
  for (const auto& [key, conns] : watchers_) n += conns.size();
  return n;
}

size_t StoreState::parkedBarriers() const {
  size_t n = 0;
  for (const auto& [key, conns] : barriers_) n += conns.size();
  return n;
}

size_t StoreState::parkedEntries() const {
  return waiters_.size() + waiting_.size() + conn_waiters_.size() + watchers_.size() +
         conn_watches_.size() + barriers_.size();
}

}  // namespace accel::store
