#include "launcher/plan/cpu_affinity.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "config/schema.h"
#include "launcher/base/numbers.h"
#include "launcher/base/text.h"
#include "probes/gpu_probe.h"

namespace accel::launcher {
namespace {

using CpuSet = std::vector<int>;

CpuSet intersect(const CpuSet& a, const std::set<int>& allowed) {
  CpuSet out;
  for (int cpu : a) {
    if (allowed.count(cpu)) out.push_back(cpu);
  }
  return out;
}

// The allowed CPUs grouped by NUMA node, in node order, empty nodes dropped; CPUs of no node
// form a last one.
std::vector<CpuSet> usableNodes(const CpuTopology& t, const std::set<int>& allowed) {
  std::vector<CpuSet> nodes;
  std::set<int> placed;
  for (const auto& node : t.nodes) {
    CpuSet cpus = intersect(node, allowed);
    for (int cpu : cpus) placed.insert(cpu);
    if (!cpus.empty()) nodes.push_back(std::move(cpus));
  }
  CpuSet rest;
  for (int cpu : allowed) {
    if (!placed.count(cpu)) rest.push_back(cpu);
  }
  if (!rest.empty()) nodes.push_back(std::move(rest));
  return nodes;
}

// `cpus` (one node's) as physical cores: sibling groups restricted to `cpus`, ordered by their
// first CPU; a CPU of no known group is a core of its own.
std::vector<CpuSet> coresOf(const CpuSet& cpus, const CpuTopology& t) {
  const std::set<int> mine(cpus.begin(), cpus.end());
  std::map<int, CpuSet> byFirst;
  std::set<int> grouped;
  for (const auto& core : t.cores) {
    CpuSet threads = intersect(core, mine);
    threads.erase(
        std::remove_if(threads.begin(), threads.end(), [&](int c) { return grouped.count(c) > 0; }),
        threads.end());
    if (threads.empty()) continue;
    for (int cpu : threads) grouped.insert(cpu);
    byFirst[threads.front()] = threads;
  }
  for (int cpu : cpus) {
    if (!grouped.count(cpu)) byFirst[cpu] = {cpu};
  }
  std::vector<CpuSet> cores;
  for (auto& [first, threads] : byFirst) cores.push_back(std::move(threads));
  return cores;
}

// `items` cut into `parts` contiguous blocks whose sizes differ by at most one (the larger first).
template <typename T>
std::vector<std::vector<T>> splitEvenly(const std::vector<T>& items, int parts) {
  std::vector<std::vector<T>> out(parts);
  const size_t base = items.size() / parts, extra = items.size() % parts;
  size_t at = 0;
  for (size_t p = 0; p < static_cast<size_t>(parts); ++p) {
    const size_t n = base + (p < extra ? 1 : 0);
    out[p].assign(items.begin() + at, items.begin() + at + n);
    at += n;
  }
  return out;
}

int countCores(const CpuSet& cpus, const CpuTopology& t) {
  return static_cast<int>(coresOf(cpus, t).size());
}

// One node's CPUs for `ranks` ranks (no more ranks than CPUs): whole cores while there are as
// many cores as ranks, else single hyperthreads in core order.
std::vector<CpuSet> splitNode(const CpuSet& cpus, int ranks, const CpuTopology& t) {
  const std::vector<CpuSet> cores = coresOf(cpus, t);
  std::vector<CpuSet> out;
  if (static_cast<int>(cores.size()) >= ranks) {
    for (const auto& block : splitEvenly(cores, ranks)) {
      CpuSet set;
      for (const auto& core : block) set.insert(set.end(), core.begin(), core.end());
      std::sort(set.begin(), set.end());
      out.push_back(std::move(set));
    }
    return out;
  }
  CpuSet threads;
  for (const auto& core : cores) threads.insert(threads.end(), core.begin(), core.end());
  for (auto& set : splitEvenly(threads, ranks)) {
    std::sort(set.begin(), set.end());
    out.push_back(std::move(set));
  }
  return out;
}

// How many of `ranks` ranks each node gets: in proportion to its CPUs, the largest remainders
// (earlier nodes on ties) taking the ranks left over.
std::vector<int> ranksPerNode(const std::vector<CpuSet>& nodes, int ranks) {
  long total = 0;
  for (const auto& n : nodes) total += static_cast<long>(n.size());
  std::vector<int> count(nodes.size());
  std::vector<std::pair<long, size_t>> remainders;
  int given = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const long share = static_cast<long>(ranks) * static_cast<long>(nodes[i].size());
    count[i] = static_cast<int>(share / total);
    given += count[i];
    remainders.push_back({-(share % total), i});
  }
  std::sort(remainders.begin(), remainders.end());
  for (size_t k = 0; given < ranks; ++k, ++given) ++count[remainders[k].second];
  return count;
}

// A CPU job: ranks spread over the nodes in order (no more ranks than allowed CPUs).
std::vector<CpuSet> spreadOverNodes(const std::vector<CpuSet>& nodes, int ranks,
                                    const CpuTopology& t) {
  std::vector<CpuSet> out;
  const int n = static_cast<int>(nodes.size());
  if (ranks <= n) {  // whole nodes per rank
    for (int r = 0; r < ranks; ++r) {
      CpuSet set;
      for (int i = r * n / ranks; i < (r + 1) * n / ranks; ++i)
        set.insert(set.end(), nodes[i].begin(), nodes[i].end());
      std::sort(set.begin(), set.end());
      out.push_back(std::move(set));
    }
    return out;
  }
  const std::vector<int> perNode = ranksPerNode(nodes, ranks);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (perNode[i] == 0) continue;
    for (auto& set : splitNode(nodes[i], perNode[i], t)) out.push_back(std::move(set));
  }
  return out;
}

// A GPU job: each rank gets its GPU's node (every allowed CPU if unknown), shared with the
// ranks on the same node; its threads are its share of that node's cores.
CpuAffinity pinToGpuNodes(const CpuTopology& t, const std::set<int>& allowed,
                          const std::vector<int>& gpuNodes) {
  CpuAffinity a;
  const CpuSet everything(allowed.begin(), allowed.end());
  std::map<CpuSet, int> sharers;
  for (int node : gpuNodes) {
    CpuSet set = node >= 0 && node < static_cast<int>(t.nodes.size())
                     ? intersect(t.nodes[node], allowed)
                     : CpuSet{};
    if (set.empty()) set = everything;
    ++sharers[set];
    a.rank_cpus.push_back(std::move(set));
  }
  for (const auto& set : a.rank_cpus) {
    const int cores = countCores(set, t), ranks = sharers[set];
    if (static_cast<int>(set.size()) < ranks) a.shared = true;
    a.rank_threads.push_back(std::max(1, cores / ranks));
  }
  return a;
}

}  // namespace

CpuAffinity planCpuAffinity(const CpuTopology& t, int localRanks,
                            const std::optional<std::vector<int>>& gpuNodes) {
  const std::set<int> allowed(t.allowed.begin(), t.allowed.end());
  if (allowed.empty() || localRanks < 1) return {};
  if (gpuNodes) {
    std::vector<int> nodes = *gpuNodes;
    nodes.resize(static_cast<size_t>(localRanks), -1);
    return pinToGpuNodes(t, allowed, nodes);
  }
  CpuAffinity a;
  if (static_cast<int>(allowed.size()) < localRanks) {
    a.shared = true;
    const CpuSet cpus(allowed.begin(), allowed.end());
    for (int r = 0; r < localRanks; ++r)
      a.rank_cpus.push_back({cpus[static_cast<size_t>(r) % cpus.size()]});
  } else {
    a.rank_cpus = spreadOverNodes(usableNodes(t, allowed), localRanks, t);
  }
  for (const auto& set : a.rank_cpus) a.rank_threads.push_back(std::max(1, countCores(set, t)));
  return a;
}

Expected<std::vector<int>> parseCpuList(const std::string& text) {
  std::set<int> cpus;
  auto number = [](const std::string& s) -> std::optional<int> {
    const auto n = parseDigits(s, 9999999);
    return n ? std::optional<int>(static_cast<int>(*n)) : std::nullopt;
  };
  std::string list = text;
  while (!list.empty() && std::isspace(static_cast<unsigned char>(list.back()))) list.pop_back();
  list.erase(0, std::min(list.size(), list.find_first_not_of(" \t")));
  if (list.empty()) return std::vector<int>{};
  std::vector<std::string_view> items = splitOn(list, ',');
  if (items.back().empty()) items.pop_back();  // a trailing comma ends the list
  for (std::string_view view : items) {
    const std::string item(view);
    size_t dash = item.find('-');
    auto lo = number(item.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : number(item.substr(dash + 1));
    if (!lo || !hi || *hi < *lo)
      return makeError("'" + item + "' in CPU list '" + list + "' is not N or N-M");
    for (int cpu = *lo; cpu <= *hi; ++cpu) cpus.insert(cpu);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string formatCpuList(const std::vector<int>& cpus) { return formatRuns(cpus, ",", "-", true); }

Expected<std::vector<int>> allowedCpus() {
  // A set for up to 64Ki CPUs, allocated (cpu_set_t holds only 1024).
  constexpr int kMaxCpus = 1 << 16;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  if (!set) return makeError("cannot allocate a CPU set");
  const size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  CPU_ZERO_S(size, set);
  if (::sched_getaffinity(0, size, set) != 0) {
    const int err = errno;
    CPU_FREE(set);
    return makeError(std::string("sched_getaffinity: ") + std::strerror(err));
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (CPU_ISSET_S(cpu, size, set)) cpus.push_back(cpu);
  }
  CPU_FREE(set);
  return cpus;
}

CpuTopology readCpuTopology(const std::vector<int>& allowed, const std::string& sysRoot) {
  CpuTopology t;
  t.allowed = allowed;
  auto readList = [](const std::string& path) -> std::vector<int> {
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line)) return {};
    auto cpus = parseCpuList(line);
    return cpus ? *cpus : std::vector<int>{};
  };
  const std::string nodeDir = sysRoot + "/devices/system/node";
  if (DIR* dir = ::opendir(nodeDir.c_str())) {
    while (dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name.size() < 5 || name.compare(0, 4, "node") != 0 || name.size() > 10 ||
          !std::all_of(name.begin() + 4, name.end(), ::isdigit)) {
        continue;
      }
      const size_t node = std::stoul(name.substr(4));
      if (t.nodes.size() <= node) t.nodes.resize(node + 1);
      t.nodes[node] = readList(nodeDir + "/" + name + "/cpulist");
    }
    ::closedir(dir);
  }
  std::set<std::vector<int>> cores;
  for (int cpu : allowed) {
    const std::string cpuDir = sysRoot + "/devices/system/cpu/cpu" + std::to_string(cpu);
    auto siblings = readList(cpuDir + "/topology/thread_siblings_list");
    if (!siblings.empty()) cores.insert(siblings);
  }
  t.cores.assign(cores.begin(), cores.end());
  return t;
}

std::vector<int> rankGpuDevices(const LaunchPlan& plan) {
  std::vector<int> ids;
  const auto& gpuIds = plan.config.config.gpu_ids;
  if (gpuIds && *gpuIds != "all") {
    for (std::string_view item : splitOn(*gpuIds, ',')) {
      const std::string id(item);
      ids.push_back(!id.empty() && id.size() < 6 && std::all_of(id.begin(), id.end(), ::isdigit)
                        ? std::stoi(id)
                        : -1);
    }
  }
  std::vector<int> devices;
  for (int r = 0; r < plan.local_world_size; ++r) {
    devices.push_back(ids.empty()                        ? r
                      : r < static_cast<int>(ids.size()) ? ids[static_cast<size_t>(r)]
                                                         : -1);
  }
  return devices;
}

std::vector<int> gpuNumaNodes(const std::vector<std::string>& busIds,
                              const std::vector<int>& devices, const std::string& sysRoot) {
  std::vector<int> nodes;
  for (int device : devices) {
    int node = -1;
    if (device >= 0 && device < static_cast<int>(busIds.size())) {
      std::string bdf = lowerCase(busIds[static_cast<size_t>(device)]);
      const size_t colon = bdf.find(':');
      if (colon != std::string::npos && colon > 4)
        bdf.erase(0, colon - 4);  // NVML's 8-digit domain
      std::ifstream in(sysRoot + "/bus/pci/devices/" + bdf + "/numa_node");
      if (!(in >> node)) node = -1;
    }
    nodes.push_back(node);
  }
  return nodes;
}

namespace {

// A GPU job's rank lines say which node each rank follows.
std::string affinityNotice(const LaunchPlan& plan, const CpuTopology& topology,
                           const CpuAffinity& a, const std::vector<int>* gpuNodes) {
  int nodes = 0;
  for (const auto& node : topology.nodes) nodes += node.empty() ? 0 : 1;
  std::string line = "CPU affinity (CPUs " + formatCpuList(topology.allowed) + " of this agent, " +
                     std::to_string(std::max(nodes, 1)) + " NUMA node" + (nodes > 1 ? "s" : "") +
                     "):";
  const std::vector<int> devices = gpuNodes ? rankGpuDevices(plan) : std::vector<int>{};
  for (size_t r = 0; r < a.rank_cpus.size(); ++r) {
    line += (r ? "; local rank " : " local rank ") + std::to_string(r) + " on CPUs " +
            formatCpuList(a.rank_cpus[r]);
    std::string notes;
    if (gpuNodes) {
      const int node = r < gpuNodes->size() ? (*gpuNodes)[r] : -1;
      notes = "GPU " + std::to_string(devices[r]) +
              (node >= 0 ? " on NUMA node " + std::to_string(node) : ", NUMA node unknown");
    }
    if (plan.omp_from_affinity) {
      notes += (notes.empty() ? "OMP_NUM_THREADS=" : ", OMP_NUM_THREADS=") +
               std::to_string(a.rank_threads[r]);
    }
    if (!notes.empty()) line += " (" + notes + ")";
  }
  return line;
}

}  // namespace

void assignCpuAffinity(LaunchPlan& plan, const CpuTopology& topology,
                       const std::optional<std::vector<int>>& gpuNodes) {
  const config::ClusterConfig& c = plan.config.config;
  if (!c.enable_cpu_affinity) return;
  if (plan.exec_in_place) {
    plan.notices.push_back("enable_cpu_affinity: each task is one rank placed by " +
                           plan.scheduler.value_or("the scheduler") +
                           "; use its CPU binding (e.g. srun --cpu-bind=cores)");
    return;
  }
  // A GPU job is one accelerate would start with torchrun (MULTI_GPU, FSDP, DeepSpeed,
  // Megatron-LM).
  const bool gpuJob = plan.accelerate_launcher != AccelerateLauncher::Simple;
  const bool nodesKnown =
      gpuJob && gpuNodes &&
      std::any_of(gpuNodes->begin(), gpuNodes->end(), [](int node) { return node >= 0; });
  if (gpuJob && !nodesKnown) {
    plan.notices.push_back(
        std::string("enable_cpu_affinity: the GPUs' NUMA nodes are not known (") +
        (gpuNodes ? "sysfs gives none for their PCI devices"
                  : "the CUDA driver gives no PCI bus ids") +
        "); the ranks are spread over the NUMA nodes as for a CPU job");
  }
  const CpuAffinity a =
      planCpuAffinity(topology, plan.local_world_size, nodesKnown ? gpuNodes : std::nullopt);
  if (a.rank_cpus.empty()) return;  // no CPU to give out: nothing pinned
  plan.rank_cpus = a.rank_cpus;
  if (plan.omp_from_affinity) plan.rank_omp_threads = a.rank_threads;
  plan.notices.push_back(affinityNotice(plan, topology, a, nodesKnown ? &*gpuNodes : nullptr));
  if (a.shared) {
    plan.notices.push_back("enable_cpu_affinity: " + std::to_string(plan.local_world_size) +
                           " local ranks but only " + std::to_string(topology.allowed.size()) +
                           " CPUs; ranks share CPUs");
  }
}

Expected<void> assignCpuAffinity(LaunchPlan& plan) {
  if (!plan.config.config.enable_cpu_affinity) return {};
  auto allowed = allowedCpus();
  if (!allowed)
    return makeError("enable_cpu_affinity: cannot read the CPUs this agent may use: " +
                     allowed.error());
  if (allowed->empty())
    return makeError("enable_cpu_affinity: sched_getaffinity reports no CPU for this agent");
  std::optional<std::vector<int>> gpuNodes;
  if (plan.accelerate_launcher != AccelerateLauncher::Simple && !plan.exec_in_place) {
    const std::vector<std::string> busIds = probes::gpuPciBusIds();
    const bool any = std::any_of(busIds.begin(), busIds.end(),
                                 [](const std::string& id) { return !id.empty(); });
    if (any) gpuNodes = gpuNumaNodes(busIds, rankGpuDevices(plan));
  }
  assignCpuAffinity(plan, readCpuTopology(*allowed), gpuNodes);
  return {};
}

}  // namespace accel::launcher
