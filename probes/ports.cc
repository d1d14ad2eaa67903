#include "probes/ports.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "accel/error.h"

namespace accel::probes {
namespace {

// Inodes of sockets listening on `port`, from /proc/net/tcp{,6}.
std::vector<std::string> listeningInodes(int port) {
  std::vector<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      auto colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;  // 0A = LISTEN
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) inodes.push_back(inode);
    }
  }
  return inodes;
}

// "pid 1234 (python3)" for the process holding socket `inode`, or "".
std::string socketOwner(const std::string& inode) {
  const std::string target = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  if (!proc) return "";
  std::string owner;
  while (dirent* p = ::readdir(proc)) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    std::string fdDir = std::string("/proc/") + p->d_name + "/fd";
    DIR* fds = ::opendir(fdDir.c_str());
    if (!fds) continue;
    while (dirent* f = ::readdir(fds)) {
      char link[256];
      ssize_t n = ::readlink((fdDir + "/" + f->d_name).c_str(), link, sizeof link - 1);
      if (n <= 0) continue;
      link[n] = '\0';
      if (target == link) {
        std::ifstream comm(std::string("/proc/") + p->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        owner = std::string("pid ") + p->d_name + " (" + name + ")";
        break;
      }
    }
    ::closedir(fds);
    if (!owner.empty()) break;
  }
  ::closedir(proc);
  return owner;
}

}  // namespace

bool portHasListener(int port) { return !listeningInodes(port).empty(); }

HostOutcome hostOrJoin(const std::function<void()>& listen,
                       const std::function<bool()>& hasListener, const std::function<void()>& pause,
                       int attempts) {
  for (int attempt = 1;; ++attempt) {
    try {
      listen();
      return HostOutcome::Hosted;
    } catch (const AddressInUseError&) {
      if (attempt >= attempts || hasListener()) return HostOutcome::Join;
    }
    pause();
  }
}

Expected<void> checkPortFree(int port, const std::string& origin) {
  for (const auto& inode : listeningInodes(port)) {
    std::string owner = socketOwner(inode);
    return makeError(origin + ": port " + std::to_string(port) + " is already in use" +
                     (owner.empty() ? "" : " by " + owner) +
                     "; choose another port or omit it to get a free one");
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return makeError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as TCPStore binds
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(fd);
  if (rc != 0) {
    return makeError(origin + ": cannot use port " + std::to_string(port) + ": " +
                     std::strerror(err));
  }
  return {};
}

}  // namespace accel::probes
