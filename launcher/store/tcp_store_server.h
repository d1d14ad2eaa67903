#pragma once
// TcpStoreServer: the job's key-value store, speaking every generation of torch's TCPStore
// protocol (wire_protocol.h) on one port, so python3-torch and LibTorch clients of torch 1.13
// and of every 2.x release use it unchanged, in the same job.
//
// One thread runs one epoll loop over non-blocking sockets: no thread per client, and clients
// blocked in WAIT are parked in a per-key table and answered when the last key they need
// appears (store_state.h). Each connection's generation is told from its first bytes. Hostile
// input (first bytes of no generation, unknown query codes, lengths over the limit, clients
// vanishing mid-frame or mid-wait, readers too slow to take their replies) closes that one
// connection, with one log line naming the peer and the bytes, and nothing else.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace accel::store {

struct TcpStoreServerOptions {
  std::string host = "127.0.0.1";  // the only address bound ("0.0.0.0" for all)
  int port = 0;                    // 0: a free port chosen by the kernel (see port())
  uint64_t max_value_bytes = 64ull
                             << 20;  // any one key or value; a longer one closes the connection
  int backlog = 65535;               // capped by the kernel's somaxconn

  // Bounded memory. What the server holds for its clients is bounded by the three limits below.
  // A connection that passes one is closed (the peer reads EOF or a reset: torch's clients raise
  // on their pending call, as when the store goes away) with one log line naming the peer, the
  // limit and the bytes, and every other connection goes on:
  //   accel store: closing the connection from 10.0.0.7:51234: its unfinished request holds
  //   134283264 bytes, over the limit of 134217728 bytes per connection
  //
  // Input: what a connection's unfinished request holds — the bytes of it received so far
  // (keys and values decoded as they arrive, each counted with RequestParser::kStringOverhead
  // bytes of bookkeeping) and bytes read but not yet parsed. A complete request is carried out
  // at once and holds nothing. Checked after every read (at most 64 KiB). At least
  // max_value_bytes + 1 KiB (start() throws accel::Error otherwise), so a SET of any value the
  // limits allow, under a key of torch's length, always fits. 128 MiB: twice the longest value, so
  // a COMPARE_SET or MULTI_SET carrying two long values fits too, while one connection can pin at
  // most 1/8 of the budget.
  uint64_t max_connection_input_bytes = 128ull << 20;
  // The least max_connection_input_bytes start() accepts: a SET of the longest value under a key
  // of torch's length.
  uint64_t leastConnectionInputBytes() const { return max_value_bytes + 1024; }
  // The same summed over every connection. When a read takes the sum past it, the connection
  // holding the most is closed (the hog, not whoever read last). 1 GiB: 8 maximal requests in
  // flight at once, or thousands of clients with the small requests torch sends; well under
  // the memory of a machine that trains, so a flood of slow uploads cannot take the agent down.
  uint64_t max_total_input_bytes = 1ull << 30;
  // Output: replies not yet taken by a slow reader, per connection (a reader this slow is
  // closed; output is not summed over connections: each reply answers a request of its own).
  uint64_t max_pending_output_bytes = 256ull << 20;
  // Not bounded: the keys, values and queues the job stores (its own data, as in torch's
  // servers; stats().keys counts them), and the bookkeeping of parked WAITs, BARRIERs and
  // WATCH_KEYs (proportional to the keys of requests already accepted, and freed when their
  // connection closes). Connections are bounded by RLIMIT_NOFILE; accepted ones use TCP
  // keepalive (60 s idle, 6 probes 10 s apart), so a client whose machine vanished without
  // closing is dropped, with what it parked, within about two minutes.

  // A key prefix (as stored: torch's clients prefix theirs with "/"): WAITs parked on keys that
  // start with it are counted in stats().tracked_waiters — who is still connected and waiting
  // (the agents each park one on their round's failure key). "": nothing is counted.
  std::string tracked_wait_prefix = "";
  // Keys under this prefix (as stored, with torch's "/"; "": none) are presence keys: a client
  // parks a WAIT on one that nobody sets and is present, for waiting(), while its connection
  // lives — a process that dies is absent within one pass of the loop (its socket closes). The
  // connection serves its other requests meanwhile, and a CANCEL_WAIT on it (a client giving up
  // a wait of its own) leaves the presence parked: an agent needs no connection for it alone.
  std::string presence_key_prefix = "";
  // Where a closed connection is explained (one line, no newline). Default: stderr, prefixed
  // "accel store: ". Called from the server's thread: it must not call the server's blocking
  // methods (awaitStats, clearKeysExcept, adoptConnection, stop).
  std::function<void(const std::string&)> log;
  // For each: told the new value of every key written (as stored, with torch's "/") that starts
  // with its prefix, right after the write. Called from the server's thread, like `log`, with the
  // same restriction; each must be quick (the loop waits for it).
  struct ObservedKeys {
    std::string prefix;
    std::function<void(const std::string& key, const std::string& value)> on_write;
  };
  std::vector<ObservedKeys> observed;
};

struct TcpStoreServerStats {
  uint64_t connections_accepted = 0;  // accepted or adopted, in total
  uint64_t connections = 0;           // open now
  uint64_t connections_dropped = 0;   // closed by the server for bad input, a limit or slow reading
  uint64_t requests = 0;
  uint64_t keys = 0;
  uint64_t tracked_waiters = 0;  // WAITs parked under options.tracked_wait_prefix
  // Connections by the generation they proved to speak (wire_protocol.h). An unvalidated
  // connection counts as legacy or torch 2.1 only once it sends a query only one of them has.
  uint64_t legacy_connections = 0;       // torch 1.13–2.0
  uint64_t torch21_connections = 0;      // torch 2.1
  uint64_t validated_connections = 0;    // torch 2.2+ (VALIDATE first)
  uint64_t unvalidated_connections = 0;  // without VALIDATE, not (yet) told apart
  uint64_t protocol_errors = 0;          // connections closed for bytes of no known protocol
  uint64_t input_limit_drops = 0;        // connections closed for an input limit (options)
  uint64_t parked_waits = 0;             // WAITs parked now
  uint64_t parked_barriers = 0;          // connections parked in a BARRIER now
  uint64_t watches = 0;                  // WATCH_KEY subscriptions now
  // Entries of the tables that index parked WAITs, BARRIERs and WATCH_KEYs by key and by
  // connection: 0 whenever nothing is parked or watched (nothing leaks after a disconnect).
  uint64_t parked_entries = 0;
  uint64_t buffered_input_bytes = 0;  // held for unfinished requests now, over all connections
  uint64_t bytes_received = 0;        // read from clients, in total
  uint64_t bytes_sent = 0;            // written to clients, in total
  uint64_t waits_woken = 0;           // parked WAITs answered (their keys came), in total
  // Bytes the request parser examined, in total: each received byte once, however the bytes
  // were split into reads (the parser resumes where it stopped; a pending frame is never re-read).
  uint64_t parser_bytes_examined = 0;
};

class TcpStoreServer {
 public:
  // Binds, listens and starts the loop thread. Raises RLIMIT_NOFILE to the hard limit.
  // Throws accel::NetworkError naming host:port when the address cannot be bound (a taken port
  // says so, as its subclass accel::AddressInUseError), accel::Error when the limits contradict
  // each other (see the options).
  static std::unique_ptr<TcpStoreServer> start(const TcpStoreServerOptions& options);

  // Stops the loop, closes every connection and the listening socket. Idempotent. The methods
  // below are thread-safe with each other, not with stop() or the destructor.
  ~TcpStoreServer();
  void stop();

  int port() const { return port_; }
  const std::string& host() const { return options_.host; }

  // A snapshot of the counters, as of the loop's last pass over its events (they are published
  // after each pass). Never blocks on the loop.
  TcpStoreServerStats stats() const;

  // Blocks until a published snapshot satisfies `pred` (at most `timeout`); returns whether one
  // did. `pred` runs on the calling thread, under the lock the loop publishes with: keep it
  // short and let it call nothing of the server's.
  bool awaitStats(const std::function<bool(const TcpStoreServerStats&)>& pred,
                  std::chrono::milliseconds timeout) const;

  // Whether a WAIT is parked on presence key `key` (options.presence_key_prefix), as of the
  // loop's last pass; when not, waits up to `grace` for a pass that parks one (a client's WAIT
  // sent just before its request on another connection may be read a pass later). Never
  // blocks on the loop; thread-safe.
  bool waiting(const std::string& key,
               std::chrono::milliseconds grace = std::chrono::milliseconds(0)) const;

  // How many presence keys have a WAIT parked, as of the loop's last pass. Thread-safe.
  size_t presentCount() const;
  // Blocks until at most `count` presence keys have a WAIT parked (at most `timeout`); returns
  // whether that happened. Thread-safe.
  bool awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const;

  // Serves `fd`, a connected stream socket (e.g. one end of a socketpair), as if the listener
  // had accepted it; `peer` names it in log lines. Takes ownership of `fd` (it is closed
  // if the loop never takes it). Blocks until the loop has taken it (at most `timeout`; throws
  // accel::TimeoutError beyond). For tests and the fuzz target, which script connections
  // without the network.
  void adoptConnection(int fd, const std::string& peer,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Removes every key whose stored name starts with none of `keep` (torch's clients store user
  // keys with a leading "/"), and returns how many were removed. Blocks until the loop has done
  // it (at most `timeout`; throws accel::TimeoutError beyond). Thread-safe. The agent calls it
  // between restart attempts, so no worker of the next attempt reads a key of the last one.
  size_t clearKeysExcept(const std::vector<std::string>& keep,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

 private:
  class Loop;
  explicit TcpStoreServer(const TcpStoreServerOptions& options);

  TcpStoreServerOptions options_;
  int port_ = 0;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

// Raises this process's RLIMIT_NOFILE soft limit to its hard limit; returns the new soft limit.
uint64_t raiseFileLimit();

}  // namespace accel::store
