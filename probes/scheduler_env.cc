#include "probes/scheduler_env.h"

#include <cctype>
#include <climits>

namespace accel::probes {
namespace {

// Hostlists with more names than this are refused: a typo like "n[1-999999999]" must not eat
// the machine's memory.
constexpr size_t kMaxHosts = 1 << 20;

bool allDigits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (unsigned char c : s) {
    if (!std::isdigit(c)) return false;
  }
  return true;
}

// Splits at commas that are not inside brackets ("a,b" → a b; "n[1,3],m" → n[1,3] m; empty
// parts are kept, so callers can reject them).
std::vector<std::string> splitTopLevel(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

// "01-04,07" → 01 02 03 04 07 (zero padding from the lower bound's width).
Expected<std::vector<std::string>> expandRanges(const std::string& body, const std::string& whole) {
  std::vector<std::string> out;
  for (const auto& item : splitTopLevel(body)) {
    size_t dash = item.find('-');
    std::string lo = item.substr(0, dash),
                hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!allDigits(lo) || !allDigits(hi)) {
      return makeError("hostlist '" + whole + "': '" + item + "' in [" + body +
                       "] is not a number or a range like 01-04");
    }
    long a = std::stol(lo), b = std::stol(hi);
    if (a > b) return makeError("hostlist '" + whole + "': range '" + item + "' goes backwards");
    if (static_cast<size_t>(b - a) >= kMaxHosts) {
      return makeError("hostlist '" + whole + "': range '" + item + "' has more than " +
                       std::to_string(kMaxHosts) + " names");
    }
    const size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    for (long n = a; n <= b; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(digits);
    }
  }
  return out;
}

Expected<int> intVar(const Environment& env, const std::string& key, int min) {
  auto value = lookup(env, key);
  if (!value) return makeError(key + " is not set");
  if (!allDigits(*value) || std::stol(*value) < min) {
    return makeError(key + "='" + *value + "' is not " +
                     (min > 0 ? "a positive" : "a non-negative") + " integer");
  }
  return static_cast<int>(std::stol(*value));
}

// The first of `keys` that is set, as an integer ≥ min.
Expected<std::optional<int>> optionalInt(const Environment& env,
                                         std::initializer_list<const char*> keys, int min) {
  for (const char* key : keys) {
    if (!lookup(env, key)) continue;
    auto value = intVar(env, key, min);
    if (!value) return std::move(value).takeError();
    return std::optional<int>(*value);
  }
  return std::optional<int>();
}

// SLURM_GPUS_ON_NODE is a count; some sites export a list ("0,1") in SLURM_STEP_GPUS instead.
std::optional<int> gpusOnNode(const Environment& env) {
  auto value = lookup(env, "SLURM_GPUS_ON_NODE");
  if (value && allDigits(*value)) return static_cast<int>(std::stol(*value));
  return std::nullopt;
}

std::string describe(const Environment& env, std::initializer_list<const char*> keys) {
  std::string out;
  for (const char* key : keys) {
    if (auto v = lookup(env, key)) out += (out.empty() ? "" : " ") + std::string(key) + "=" + *v;
  }
  return out;
}

Expected<SchedulerInfo> fromSlurm(const Environment& env) {
  SchedulerInfo s;
  s.name = "SLURM";
  s.job_id = lookup(env, "SLURM_JOB_ID");
  s.in_step = lookup(env, "SLURM_STEP_ID").has_value() && lookup(env, "SLURM_PROCID").has_value();
  const char* listKey = s.in_step && lookup(env, "SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST"
                        : lookup(env, "SLURM_JOB_NODELIST")             ? "SLURM_JOB_NODELIST"
                                                                        : "SLURM_NODELIST";
  auto list = lookup(env, listKey);
  if (!list) return makeError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not");
  auto hosts = expandHostlist(*list);
  if (!hosts) return makeError(std::string(listKey) + ": " + hosts.error());
  s.hosts = std::move(*hosts);

  auto nodes = optionalInt(
      env, {s.in_step ? "SLURM_STEP_NUM_NODES" : "SLURM_JOB_NUM_NODES", "SLURM_NNODES"}, 1);
  if (!nodes) return std::move(nodes).takeError();
  s.num_nodes = nodes->value_or(static_cast<int>(s.hosts.size()));
  if (static_cast<size_t>(s.num_nodes) != s.hosts.size()) {
    return makeError("SLURM says " + std::to_string(s.num_nodes) + " nodes but " + listKey + "='" +
                     *list + "' names " + std::to_string(s.hosts.size()));
  }
  auto nodeId = optionalInt(env, {"SLURM_NODEID"}, 0);
  if (!nodeId) return std::move(nodeId).takeError();
  s.node_rank = nodeId->value_or(0);
  if (s.node_rank >= s.num_nodes) {
    return makeError("SLURM_NODEID=" + std::to_string(s.node_rank) + " but the step has " +
                     std::to_string(s.num_nodes) + " nodes");
  }
  s.gpus_on_node = gpusOnNode(env);
  auto cpus = optionalInt(env, {"SLURM_CPUS_ON_NODE"}, 1);
  if (!cpus) return std::move(cpus).takeError();
  s.cpus_on_node = *cpus;

  if (s.in_step) {
    auto tasks = optionalInt(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, 1);
    auto procId = intVar(env, "SLURM_PROCID", 0);
    auto localId = optionalInt(env, {"SLURM_LOCALID"}, 0);
    if (!tasks) return std::move(tasks).takeError();
    if (!procId) return std::move(procId).takeError();
    if (!localId) return std::move(localId).takeError();
    s.num_tasks = tasks->value_or(1);
    s.task_rank = *procId;
    s.local_task_rank = localId->value_or(0);
    const char* perNodeKey = lookup(env, "SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                                                                      : "SLURM_TASKS_PER_NODE";
    if (auto perNode = lookup(env, perNodeKey)) {
      auto counts = expandTasksPerNode(*perNode);
      if (!counts) return makeError(std::string(perNodeKey) + ": " + counts.error());
      if (static_cast<int>(counts->size()) != s.num_nodes) {
        return makeError(std::string(perNodeKey) + "='" + *perNode + "' lists " +
                         std::to_string(counts->size()) + " nodes but the step has " +
                         std::to_string(s.num_nodes));
      }
      s.local_num_tasks = (*counts)[static_cast<size_t>(s.node_rank)];
    } else {
      s.local_num_tasks = s.num_tasks / s.num_nodes;
    }
    if (s.task_rank >= s.num_tasks || s.local_task_rank >= s.local_num_tasks) {
      return makeError("SLURM_PROCID/SLURM_LOCALID are outside the step's " +
                       std::to_string(s.num_tasks) + " tasks");
    }
  }
  s.source = describe(env, {"SLURM_JOB_ID", listKey, "SLURM_NNODES", "SLURM_NODEID", "SLURM_NTASKS",
                            "SLURM_PROCID", "SLURM_LOCALID"});
  return s;
}

// Open MPI (OMPI_COMM_WORLD_*) or a PMI launcher (PMI_RANK/PMI_SIZE with MPICH's local ids).
Expected<SchedulerInfo> fromMpi(const Environment& env, bool openMpi) {
  SchedulerInfo s;
  s.name = openMpi ? "Open MPI" : "PMI";
  const std::string rankKey = openMpi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK";
  const std::string sizeKey = openMpi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
  auto size = intVar(env, sizeKey, 1);
  auto rank = intVar(env, rankKey, 0);
  if (!size) return std::move(size).takeError();
  if (!rank) return std::move(rank).takeError();
  auto localRank =
      optionalInt(env, {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, 0);
  auto localSize =
      optionalInt(env, {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}, 1);
  if (!localRank) return std::move(localRank).takeError();
  if (!localSize) return std::move(localSize).takeError();
  if (!*localRank || !*localSize) {
    return makeError(
        rankKey + " and " + sizeKey + " are set but not this process's local rank and count (" +
        (openMpi ? "OMPI_COMM_WORLD_LOCAL_RANK/_LOCAL_SIZE" : "MPI_LOCALRANKID/MPI_LOCALNRANKS") +
        ")");
  }
  s.num_tasks = *size;
  s.task_rank = *rank;
  s.local_task_rank = **localRank;
  s.local_num_tasks = **localSize;
  if (s.task_rank >= s.num_tasks || s.local_task_rank >= s.local_num_tasks ||
      s.local_num_tasks > s.num_tasks) {
    return makeError(rankKey + "/" + sizeKey + " and the local rank/count disagree (rank " +
                     std::to_string(s.task_rank) + " of " + std::to_string(s.num_tasks) +
                     ", local " + std::to_string(s.local_task_rank) + " of " +
                     std::to_string(s.local_num_tasks) + ")");
  }
  // MPI does not name the node: with the same number of ranks on every node, placed by slot
  // (mpirun's default), the node is rank / ranks-per-node.
  s.num_nodes = s.num_tasks % s.local_num_tasks == 0 ? s.num_tasks / s.local_num_tasks : 1;
  s.node_rank = s.num_nodes > 1 ? s.task_rank / s.local_num_tasks : 0;
  if (openMpi) s.job_id = lookup(env, "OMPI_MCA_ess_base_jobid");
  s.source = openMpi
                 ? describe(env, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"})
                 : describe(env, {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"});
  return s;
}

}  // namespace

Expected<std::vector<std::string>> expandHostlist(const std::string& text) {
  std::vector<std::string> hosts;
  if (text.empty()) return makeError("hostlist is empty");
  for (const auto& item : splitTopLevel(text)) {
    if (item.empty()) return makeError("hostlist '" + text + "': empty name between commas");
    // Cartesian product over the bracket groups of this item.
    std::vector<std::string> names{""};
    size_t pos = 0;
    while (pos < item.size()) {
      size_t open = item.find_first_of("[]", pos);
      if (open == std::string::npos) {
        for (auto& n : names) n += item.substr(pos);
        break;
      }
      if (item[open] == ']')
        return makeError("hostlist '" + text + "': ']' without '[' in '" + item + "'");
      size_t close = item.find_first_of("[]", open + 1);
      if (close == std::string::npos || item[close] != ']') {
        return makeError("hostlist '" + text + "': '[' without matching ']' in '" + item + "'");
      }
      auto values = expandRanges(item.substr(open + 1, close - open - 1), text);
      if (!values) return values;
      const std::string literal = item.substr(pos, open - pos);
      if (names.size() * values->size() > kMaxHosts) {
        return makeError("hostlist '" + text + "' has more than " + std::to_string(kMaxHosts) +
                         " names");
      }
      std::vector<std::string> next;
      next.reserve(names.size() * values->size());
      for (const auto& n : names) {
        for (const auto& v : *values) next.push_back(n + literal + v);
      }
      names = std::move(next);
      pos = close + 1;
    }
    for (auto& n : names) {
      if (n.find_first_of(" \t\n") != std::string::npos)
        return makeError("hostlist '" + text + "': a name contains blanks");
    }
    if (hosts.size() + names.size() > kMaxHosts) {
      return makeError("hostlist '" + text + "' has more than " + std::to_string(kMaxHosts) +
                       " names");
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  return hosts;
}

Expected<std::vector<int>> expandTasksPerNode(const std::string& text) {
  std::vector<int> out;
  for (const auto& item : splitTopLevel(text)) {
    std::string count = item, repeat = "1";
    if (size_t paren = item.find("(x");
        paren != std::string::npos && !item.empty() && item.back() == ')') {
      count = item.substr(0, paren);
      repeat = item.substr(paren + 2, item.size() - paren - 3);
    }
    if (!allDigits(count) || !allDigits(repeat) || std::stol(repeat) < 1 ||
        out.size() + static_cast<size_t>(std::stol(repeat)) > kMaxHosts) {
      return makeError("'" + text + "': '" + item + "' is not N or N(xM)");
    }
    out.insert(out.end(), static_cast<size_t>(std::stol(repeat)),
               static_cast<int>(std::stol(count)));
  }
  return out;
}

Expected<std::optional<SchedulerInfo>> detectScheduler(const Environment& env) {
  Expected<SchedulerInfo> info = makeError("");
  if (lookup(env, "OMPI_COMM_WORLD_SIZE")) {
    info = fromMpi(env, true);
  } else if (lookup(env, "SLURM_JOB_ID")) {
    info = fromSlurm(env);
  } else if (lookup(env, "PMI_SIZE") && lookup(env, "PMI_RANK")) {
    info = fromMpi(env, false);
  } else {
    return std::optional<SchedulerInfo>();
  }
  if (!info) return std::move(info).takeError();
  return std::optional<SchedulerInfo>(std::move(*info));
}

}  // namespace accel::probes
