#include "launcher/supervise/status_socket.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "launcher/rendezvous/etcd/client/etcd_client.h"
#include "libaccel/store/tcp_store_client.h"

namespace accel::launcher {
namespace {

std::string errnoText() { return std::strerror(errno); }

Expected<sockaddr_un> socketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return makeError("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// "1234.sock" → 1234; 0 for other names.
pid_t pidOfSocket(const std::string& name) {
  if (name.size() < 6 || name.compare(name.size() - 5, 5, ".sock") != 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str(), &end, 10);
  return end == name.c_str() + name.size() - 5 && pid > 0 ? static_cast<pid_t>(pid) : 0;
}

std::vector<std::string> socketNames(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (pidOfSocket(e->d_name) > 0) names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return pidOfSocket(a) < pidOfSocket(b);
  });
  return names;
}

bool processExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Reads one answer to EOF, within the deadline.
Expected<std::string> readAnswer(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string text;
  char buf[65536];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      return makeError("no answer in time");
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return makeError("read: " + errnoText());
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

std::string cell(const nlohmann::json& v, const char* format, double scale = 1) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v.get<double>() / scale);
  return buf;
}

std::string text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump();
}

void renderRanks(std::ostringstream& out, const nlohmann::json& a);
void renderHealth(std::ostringstream& out, const nlohmann::json& a);
void renderStragglers(std::ostringstream& out, const nlohmann::json& a);

void renderJob(std::ostringstream& out, const nlohmann::json& a) {
  std::string command;
  for (const auto& word : a.value("command", nlohmann::json::array()))
    command += (command.empty() ? "" : " ") + text(word);
  out << "job " << text(a.value("run_id", nlohmann::json())) << ": agent pid "
      << text(a.value("agent_pid", nlohmann::json())) << ", machine "
      << text(a.value("machine_rank", nlohmann::json())) << " of "
      << text(a.value("num_machines", nlohmann::json())) << ", up "
      << cell(a.value("uptime_s", nlohmann::json()), "%.0f s") << ", attempt "
      << text(a.value("attempt", nlohmann::json())) << " (max restarts "
      << text(a.value("max_restarts", nlohmann::json())) << ")\n  command: " << command
      << "\n  store: " << text(a.value("store", nlohmann::json())) << "\n";
  renderHealth(out, a);
  renderStragglers(out, a);
  renderRanks(out, a);
  for (const auto& other : a.value("other_machines", nlohmann::json::array())) {
    out << "  machine " << text(other.value("machine_rank", nlohmann::json())) << " (agent pid "
        << text(other.value("agent_pid", nlohmann::json())) << ", shared "
        << cell(nlohmann::json(a.value("time", 0.0) - other.value("time", 0.0)), "%.0f s")
        << " before this answer):\n";
    renderRanks(out, other);
  }
  for (const auto& m : a.value("machines_not_shared_yet", nlohmann::json::array()))
    out << "  machine " << text(m)
        << ": has not shared its status yet (each agent shares its own every 2 s)\n";
}

// "  health checks before this round: disk /tmp passed (0 ms), command passed (5 ms)".
void renderHealth(std::ostringstream& out, const nlohmann::json& a) {
  const auto checks = a.value("health_checks", nlohmann::json::array());
  if (!checks.is_array() || checks.empty()) return;
  out << "  health checks before this round:";
  const char* sep = " ";
  for (const auto& c : checks) {
    out << sep << text(c.value("name", nlohmann::json())) << " "
        << (c.value("passed", false) ? "passed"
                                     : "failed: " + text(c.value("detail", nlohmann::json())))
        << " (" << text(c.value("took_ms", nlohmann::json())) << " ms)";
    sep = ", ";
  }
  out << "\n";
}

// "  straggler scores (last 20 steps, threshold 0.70): rank 0 1.00, rank 1 0.33 straggles".
void renderStragglers(std::ostringstream& out, const nlohmann::json& a) {
  const auto s = a.value("stragglers", nlohmann::json::object());
  if (!s.is_object() || !s.contains("scores")) return;
  out << "  straggler scores (last " << text(s.value("window_steps", nlohmann::json()))
      << " steps, threshold " << cell(s.value("threshold", nlohmann::json()), "%.2f") << "):";
  const auto straggling = s.value("straggling", nlohmann::json::array());
  const char* sep = " ";
  for (const auto& r : s["scores"]) {
    const auto rank = r.value("rank", nlohmann::json());
    const bool slow = std::find(straggling.begin(), straggling.end(), rank) != straggling.end();
    out << sep << "rank " << text(rank) << " " << cell(r.value("score", nlohmann::json()), "%.2f")
        << (slow ? " straggles" : "");
    sep = ", ";
  }
  out << "\n";
}

void renderRanks(std::ostringstream& out, const nlohmann::json& a) {
  char line[256];
  std::snprintf(line, sizeof line, "  %5s %5s %8s %6s %6s %10s %9s %7s %9s %5s\n", "rank", "local",
                "pid", "state", "cpu%", "rss", "output", "step", "stepped", "exit");
  out << line;
  for (const auto& r : a.value("ranks", nlohmann::json::array())) {
    std::snprintf(line, sizeof line, "  %5s %5s %8s %6s %6s %10s %9s %7s %9s %5s\n",
                  text(r["rank"]).c_str(), text(r["local_rank"]).c_str(), text(r["pid"]).c_str(),
                  text(r["state"]).c_str(), cell(r["cpu_percent"], "%.1f").c_str(),
                  cell(r["rss_bytes"], "%.1f MiB", 1 << 20).c_str(),
                  cell(r["seconds_since_output"], "%.1f s").c_str(), text(r["step"]).c_str(),
                  cell(r["seconds_since_step"], "%.1f s").c_str(), text(r["exit_code"]).c_str());
    out << line;
  }
}

using KeyReader = std::function<std::optional<std::string>(const std::string&)>;

// A reader of the job's store (TCP) at "host:port", bounded by 2 s a call.
KeyReader storeReader(const std::string& store) {
  const size_t colon = store.rfind(':');
  store::TcpStoreClientOptions o;
  o.host = store.substr(0, colon);
  o.port = std::atoi(store.c_str() + colon + 1);
  o.connect_timeout = std::chrono::seconds(2);
  o.timeout = std::chrono::seconds(2);
  auto client = std::make_shared<store::TcpStoreClient>(o);
  return [client](const std::string& key) -> std::optional<std::string> {
    if (!client->check({key})) return std::nullopt;
    return client->get(key);
  };
}

// A reader of the job's etcd ({"endpoints", "https", "cacert", "cert", "key"}), bounded by 2 s.
KeyReader etcdReader(const nlohmann::json& etcd) {
  auto endpoints = parseEtcdEndpoints(etcd.value("endpoints", ""));
  if (!endpoints) throw Error(endpoints.error());
  const TlsFiles files{etcd.value("cacert", ""), etcd.value("cert", ""), etcd.value("key", "")};
  if (auto tls = useTls(*endpoints, etcd.value("https", false), files); !tls)
    throw Error(tls.error());
  EtcdOptions o;
  o.endpoints = *endpoints;
  o.timeout = std::chrono::seconds(2);
  o.attempt_timeout = std::chrono::seconds(1);
  auto client = std::make_shared<EtcdClient>(o);
  return [client](const std::string& key) -> std::optional<std::string> {
    auto kv = client->get(key);
    if (!kv) return std::nullopt;
    return kv->value;
  };
}

// A job on several machines: the other machines' answers, from the job's store or its etcd
// (each agent shares its own every 2 s). A machine with no answer there yet is listed in
// "machines_not_shared_yet" (its agent may have joined a moment ago); a store or etcd that cannot
// be read is named in `problems`.
void addOtherMachines(nlohmann::json& job, std::vector<std::string>& problems) {
  const std::string prefix = job.value("machine_status_key_prefix", "");
  const int machines = job.value("num_machines", 1);
  const std::string store = job.value("store", "");
  const bool onEtcd = job.contains("etcd");
  if (prefix.empty() || machines <= 1 || (!onEtcd && store.rfind(':') == std::string::npos)) return;
  const std::string where =
      onEtcd ? "etcd at " + job["etcd"].value("endpoints", "") : "its store " + store;
  nlohmann::json others = nlohmann::json::array();
  nlohmann::json pending = nlohmann::json::array();
  try {
    const KeyReader read = onEtcd ? etcdReader(job["etcd"]) : storeReader(store);
    for (int m = 0; m < machines; ++m) {
      if (m == job.value("machine_rank", -1)) continue;
      auto value = read(prefix + std::to_string(m));
      auto answer = value ? nlohmann::json::parse(*value, nullptr, false) : nlohmann::json();
      if (answer.is_object()) {
        others.push_back(std::move(answer));
      } else {
        pending.push_back(m);  // its agent may have joined a moment ago: said, not a problem
      }
    }
  } catch (const std::exception& e) {
    problems.push_back("cannot read the other machines of job " + job.value("run_id", "") +
                       " from " + where + ": " + e.what());
  }
  job["other_machines"] = std::move(others);
  job["machines_not_shared_yet"] = std::move(pending);
}

}  // namespace

Expected<std::string> statusDirectory() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string dir = runtime && *runtime ? std::string(runtime) + "/accel"
                                              : "/tmp/accel-" + std::to_string(::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return makeError("cannot create " + dir + ": " + errnoText());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return makeError("cannot read " + dir + ": " + errnoText());
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 0777) != 0700) {
    return makeError(
        dir +
        " is not a directory of this user with mode 0700; remove it or fix its owner and mode");
  }
  return dir;
}

void StatusListener::close() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

Expected<void> StatusListener::open() {
  auto dir = statusDirectory();
  if (!dir) return std::move(dir).takeError();
  for (const auto& name : socketNames(*dir)) {
    if (!processExists(pidOfSocket(name))) ::unlink((*dir + "/" + name).c_str());
  }
  path_ = *dir + "/" + std::to_string(::getpid()) + ".sock";
  auto addr = socketAddress(path_);
  if (!addr) return std::move(addr).takeError();
  ::unlink(path_.c_str());  // this pid's, from an agent that died before this one got its pid
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return makeError("status socket: " + errnoText());
  const mode_t old = ::umask(0177);  // 0600 from the start: no window where others could connect
  const int bound = ::bind(fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  ::umask(old);
  if (bound != 0 || ::listen(fd_, 16) != 0) {
    const std::string why = errnoText();
    ::close(fd_);
    fd_ = -1;
    return makeError("cannot listen on " + path_ + ": " + why);
  }
  return {};
}

int StatusListener::answerAll(const std::string& json) {
  int answered = 0;
  while (true) {
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) return answered;
    ::send(client, json.data(), json.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::close(client);
    ++answered;
  }
}

std::vector<nlohmann::json> queryAgents(std::vector<std::string>& problems,
                                        std::chrono::milliseconds timeout) {
  std::vector<nlohmann::json> answers;
  auto dir = statusDirectory();
  if (!dir) {
    problems.push_back(dir.error());
    return answers;
  }
  for (const auto& name : socketNames(*dir)) {
    const std::string path = *dir + "/" + name;
    auto addr = socketAddress(path);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!addr || fd < 0) continue;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
      if (errno == ECONNREFUSED) ::unlink(path.c_str());  // nobody listens: its agent is gone
      ::close(fd);
      continue;
    }
    auto text = readAnswer(fd, std::chrono::steady_clock::now() + timeout);
    ::close(fd);
    auto json = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (!text || json.is_discarded() || !json.is_object()) {
      problems.push_back("the agent at " + path +
                         " did not answer: " + (text ? "not JSON" : text.error()));
      continue;
    }
    addOtherMachines(json, problems);
    answers.push_back(std::move(json));
  }
  return answers;
}

std::string renderStatusText(const std::vector<nlohmann::json>& agents) {
  if (agents.empty()) return "no accel job of this user is running on this machine\n";
  std::ostringstream out;
  for (size_t i = 0; i < agents.size(); ++i) {
    if (i) out << "\n";
    renderJob(out, agents[i]);
  }
  return out.str();
}

}  // namespace accel::launcher
