#include "probes/net_check.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "probes/run_program.h"

namespace accel::probes {

// The vocabulary of the machine's environment comes from probes/.

namespace {

using Clock = std::chrono::steady_clock;

std::string numericHost(const sockaddr* addr, socklen_t len) {
  char buf[NI_MAXHOST] = {0};
  if (::getnameinfo(addr, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return buf;
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

Expected<void> resolve(const std::string& host, int port, int socktype, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  hints.ai_flags = AI_NUMERICSERV;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list); rc != 0) {
    return makeError("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  }
  return {};
}

std::string interfaceHolding(const sockaddr* addr) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != addr->sa_family) continue;
    if (addr->sa_family == AF_INET &&
        reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
            reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) {
      name = i->ifa_name;
    } else if (addr->sa_family == AF_INET6 &&
               std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr,
                           sizeof(in6_addr)) == 0) {
      name = i->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return name;
}

// One non-blocking connect, bounded by `limit`; "" on success, else the reason.
std::string tryConnect(const addrinfo* a, std::chrono::milliseconds limit) {
  int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
  if (fd < 0) return std::strerror(errno);
  std::string reason;
  if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      reason = std::strerror(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
      int err = 0;
      socklen_t len = sizeof err;
      if (ready == 0) {
        reason = "no answer within " + std::to_string(limit.count()) + " ms";
      } else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        reason = std::strerror(errno);
      } else if (err != 0) {
        reason = std::strerror(err);
      }
    }
  }
  ::close(fd);
  return reason;
}

}  // namespace

bool isThisMachine(const std::string& host) {
  AddrInfo found;
  if (!resolve(host, 9, SOCK_STREAM, found)) return false;
  for (addrinfo* a = found.list; a; a = a->ai_next) {
    if (a->ai_family == AF_INET &&
        (ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127) {
      return true;
    }
    if (a->ai_family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr)) {
      return true;
    }
    if (!interfaceHolding(a->ai_addr).empty()) return true;
  }
  return false;
}

Expected<Route> routeTo(const std::string& host) {
  AddrInfo found;
  if (auto ok = resolve(host, 9, SOCK_DGRAM, found); !ok) return std::move(ok).takeError();
  std::string lastError;
  for (addrinfo* a = found.list; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // connect() on a UDP socket only picks the route and the source address.
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      lastError = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    ::close(fd);
    Route r;
    r.address = numericHost(a->ai_addr, a->ai_addrlen);
    r.local_ip = numericHost(reinterpret_cast<sockaddr*>(&local), len);
    r.interface = interfaceHolding(reinterpret_cast<sockaddr*>(&local));
    return r;
  }
  return makeError("no route from this machine to '" + host + "'" +
                   (lastError.empty() ? "" : ": " + lastError));
}

bool isLoopback(const Route& route) {
  return route.local_ip.rfind("127.", 0) == 0 || route.local_ip == "::1";
}

Expected<Route> outwardRoute() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return makeError(std::string("getifaddrs: ") + std::strerror(errno));
  std::optional<Route> v4, v6;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const int family = i->ifa_addr->sa_family;
    if (family == AF_INET && !v4) {
      v4 = Route{"", numericHost(i->ifa_addr, sizeof(sockaddr_in)), i->ifa_name};
    } else if (family == AF_INET6 && !v6 &&
               !IN6_IS_ADDR_LINKLOCAL(
                   &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
      v6 = Route{"", numericHost(i->ifa_addr, sizeof(sockaddr_in6)), i->ifa_name};
    }
  }
  ::freeifaddrs(list);
  if (v4) return *v4;
  if (v6) return *v6;
  return makeError("no network interface other than loopback is up here");
}

std::string describeInterface(const Route& route) {
  if (route.interface.empty()) return route.local_ip.empty() ? "no interface" : route.local_ip;
  return route.interface + " (" + route.local_ip + ")";
}

Expected<Route> waitForListener(const std::string& host, int port,
                                std::chrono::milliseconds timeout,
                                std::chrono::milliseconds progressEvery,
                                const std::function<void(const std::string&)>& progress,
                                const std::string& addressFlag) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto nextProgress = start + progressEvery;
  auto backoff = std::chrono::milliseconds(10);
  std::optional<Route> route;
  std::string where = host + ":" + std::to_string(port), reason;
  while (true) {
    AddrInfo found;
    if (auto resolved = resolve(host, port, SOCK_STREAM, found); !resolved) {
      // A name that does not resolve yet is waited for: a Kubernetes pod's name resolves once
      // the pod is ready.
      reason = resolved.error() + " (yet)";
    } else if (!route) {
      // An address with no route will not heal by waiting: said at once.
      auto routed = routeTo(host);
      if (!routed) {
        return makeError("cannot reach the master agent (machine_rank 0) at " + where + ": " +
                         routed.error() + " (is " + addressFlag + " right?)");
      }
      route = *routed;
      where += " from local interface " + describeInterface(*route);
    }
    if (route) {
      for (addrinfo* a = found.list; a; a = a->ai_next) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        reason = tryConnect(
            a, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(2000)));
        if (reason.empty()) return *route;
      }
    }
    const auto now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
    if (now >= deadline) {
      return makeError("cannot reach the master agent (machine_rank 0) at " + where + ": " +
                       reason + " (tried for " + std::to_string(waited) +
                       " s; is machine 0's agent running, and is " + addressFlag +
                       " an address the other machines can reach?)");
    }
    if (now >= nextProgress && progress) {
      progress("waiting for the master agent at " + where + ": " + reason + " (" +
               std::to_string(waited) + " s)");
      nextProgress = now + progressEvery;
    }
    std::this_thread::sleep_for(
        std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

std::optional<std::string> slurmNodeAddress(const std::string& name) {
  auto run = runCaptured({"scontrol", "show", "node", "-o", name}, std::chrono::seconds(10));
  if (!run || run->exit_code != 0) return std::nullopt;
  const std::string key = "NodeAddr=";
  size_t pos = run->output.find(key);
  if (pos == std::string::npos) return std::nullopt;
  size_t end = run->output.find_first_of(" \n", pos);
  std::string addr = run->output.substr(
      pos + key.size(), end == std::string::npos ? std::string::npos : end - pos - key.size());
  if (addr.empty()) return std::nullopt;
  return addr;
}

}  // namespace accel::probes
