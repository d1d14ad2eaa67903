// Load generator for scripts/bench/store.sh: N clients, each on its own non-blocking TCP
// connection, do what a rank does in init_process_group over TCPStore — `set` its address,
// `add` to a counter and `wait` on a barrier key (the one whose add completes the count sets it).
// Prints the time from the first connect to the last client released, in seconds, and with
// --memory-of the server's resident memory per connection (KiB: its VmRSS with every connection
// open and released, less before the first connect). Any connection refused, reset or closed by
// the server fails the run, naming it.
// --protocol validated makes every client a torch 2.x one (VALIDATE + magic first, 2.x codes).
//   store_load --clients N [--processes P] [--host H] [--port P] [--protocol legacy|validated]
//              [--memory-of parent|PID]
//   (default: $MASTER_ADDR/$MASTER_PORT, legacy; parent: the agent that runs it, whose store
//   it is)

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/wire_protocol.h"

namespace {

using accel::store::wire::Generation;
using accel::store::wire::Op;
using accel::store::wire::Request;

struct Client {
  int fd = -1;
  int stage =
      0;  // 0 connecting/sent ADD, 1 waiting for ADD reply, 2 waiting for WAIT reply, 3 done
  std::string in;
};

Generation protocol = Generation::Legacy;

std::string request(Op op, std::vector<std::string> keys, int64_t delta = 0,
                    std::string value = "") {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.delta = delta;
  r.value = std::move(value);
  r.word = accel::store::wire::kValidationMagic;
  return accel::store::wire::encodeRequest(protocol, r);
}

void sendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      std::perror("send");
      std::exit(1);
    }
    off += static_cast<size_t>(n);
  }
}

// The resident memory of process `pid` now, KiB (0 when it cannot be read).
long residentKib(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return 0;
  char line[256];
  long kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %ld", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

// Runs `count` clients to completion; total is the barrier size over all processes. Once all are
// released it writes a byte to `released` and keeps its connections open until `hold` closes.
int runClients(const sockaddr_in& addr, int count, int total, const std::string& tag, int released,
               int hold) {
  int ep = ::epoll_create1(0);
  std::vector<Client> clients(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    Client& c = clients[static_cast<size_t>(i)];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 &&
        errno != EINPROGRESS) {
      std::perror("connect");
      return 1;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  const std::string first =
      protocol == Generation::Validated ? request(Op::Validate, {}) : std::string();
  const std::string add = request(Op::Add, {"/counter-" + tag}, 1);
  const std::string wait = request(Op::Wait, {"/barrier-" + tag});
  const std::string release = request(Op::Set, {"/barrier-" + tag}, 0, "1");
  int done = 0;
  std::vector<epoll_event> events(1024);
  while (done < count) {
    int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 60000);
    if (n <= 0) {
      std::fprintf(stderr, "store_load: stalled with %d/%d clients released\n", done, count);
      return 1;
    }
    for (int e = 0; e < n; ++e) {
      Client& c = clients[events[e].data.u32];
      if (c.stage == 0 && (events[e].events & EPOLLOUT)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
          std::fprintf(stderr, "store_load: connect: %s\n", std::strerror(err));
          return 1;
        }
        // SET has no reply in any generation: the ADD's is the first.
        sendAll(c.fd, first +
                          request(Op::Set,
                                  {"/addr-" + tag + "-" + std::to_string(::getpid()) + "-" +
                                   std::to_string(events[e].data.u32)},
                                  0, "10.0.0.1:29500") +
                          add);
        c.stage = 1;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = events[e].data.u32;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
        continue;
      }
      if (!(events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      char buf[64];
      ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        std::fprintf(stderr, "store_load: the store closed a connection\n");
        return 1;
      }
      c.in.append(buf, static_cast<size_t>(got));
      if (c.stage == 1 && c.in.size() >= 8) {
        int64_t value;
        std::memcpy(&value, c.in.data(), 8);
        c.in.erase(0, 8);
        if (value == total) sendAll(c.fd, release);
        sendAll(c.fd, wait);
        c.stage = 2;
      }
      if (c.stage == 2 && !c.in.empty()) {
        c.stage = 3;
        ++done;
      }
    }
  }
  const char one = 1;
  if (::write(released, &one, 1) != 1) return 1;
  char ignored;
  while (::read(hold, &ignored, 1) > 0) {
  }
  for (auto& c : clients) ::close(c.fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 256, processes = 2;
  pid_t server = 0;
  std::string host = std::getenv("MASTER_ADDR") ? std::getenv("MASTER_ADDR") : "127.0.0.1";
  int port = std::getenv("MASTER_PORT") ? std::atoi(std::getenv("MASTER_PORT")) : 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--clients")
      clients = std::atoi(argv[i + 1]);
    else if (flag == "--processes")
      processes = std::atoi(argv[i + 1]);
    else if (flag == "--host")
      host = argv[i + 1];
    else if (flag == "--port")
      port = std::atoi(argv[i + 1]);
    else if (flag == "--memory-of")
      server = std::string(argv[i + 1]) == "parent" ? ::getppid() : std::atoi(argv[i + 1]);
    else if (flag == "--protocol")
      protocol =
          std::string(argv[i + 1]) == "validated" ? Generation::Validated : Generation::Legacy;
  }
  if (port <= 0 || clients < 1 || processes < 1) {
    std::fprintf(stderr,
                 "usage: store_load --clients N [--processes P] [--host H] [--port P] [--protocol "
                 "legacy|validated]\n");
    return 2;
  }
  // Keys of their own, so a run never meets a barrier an earlier run left set.
  const std::string tag =
      std::to_string(::getpid()) + "-" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  accel::store::raiseFileLimit();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);

  const long before = server ? residentKib(server) : 0;
  int released[2], hold[2];
  if (::pipe(released) || ::pipe(hold)) return 1;
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    int share = clients / processes + (p < clients % processes ? 1 : 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(released[0]), ::close(hold[1]);
      ::_exit(runClients(addr, share, clients, tag, released[1], hold[0]));
    }
    children.push_back(pid);
  }
  ::close(released[1]), ::close(hold[0]);
  // Every process's clients released (or one failed: its end closes the pipe early).
  int heard = 0;
  char byte;
  while (heard < processes && ::read(released[0], &byte, 1) == 1) ++heard;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long with = server ? residentKib(server) : 0;
  ::close(hold[1]);
  int failures = 0;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  if (failures || heard < processes) return 1;
  if (server) {
    std::printf("%.4f %.1f\n", seconds, double(with - before) / clients);
  } else {
    std::printf("%.4f\n", seconds);
  }
  return 0;
}
