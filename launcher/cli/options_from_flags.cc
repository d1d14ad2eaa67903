#include "launcher/cli/options_from_flags.h"

#include "config/schema.h"
#include "launcher/base/numbers.h"
#include "launcher/base/text.h"
#include "launcher/plan/python_str.h"

namespace accel::launcher {
namespace {

// The largest machine or process count a flag may give.
constexpr long long kMaxCount = 9999999;

using nlohmann::json;

class Reader {
 public:
  explicit Reader(const ParsedLaunchFlags& flags) : f_(flags) {}
  bool given(const std::string& dest) const { return f_.isGiven(dest); }
  const json& value(const std::string& dest) const { return f_.values.at(dest); }
  bool on(const std::string& dest) const {
    return value(dest).is_boolean() && value(dest).get<bool>();
  }
  std::optional<std::string> text(const std::string& dest) const {
    const json& v = value(dest);
    if (v.is_null()) return std::nullopt;
    return v.is_string() ? v.get<std::string>() : pythonStr(v);
  }
  template <typename T>
  Expected<std::optional<T>> number(const std::string& dest, T min, T max) const {
    const json& v = value(dest);
    if (v.is_null()) return std::optional<T>();
    const double d = v.get<double>();
    if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max))) {
      return makeError(f_.nameOf(dest) + ": " + pythonStr(v) + " is out of range " +
                       pythonStr(json(min)) + ".." + pythonStr(json(max)));
    }
    return std::optional<T>(v.get<T>());
  }
  // Two spellings of one setting given with different values.
  Expected<void> agree(const std::string& a, const std::string& b) const {
    if (given(a) && given(b) && value(a) != value(b)) {
      return makeError(f_.nameOf(a) + " " + pythonStr(value(a)) + " and " + f_.nameOf(b) + " " +
                       pythonStr(value(b)) + " contradict each other (they name the same setting)");
    }
    return {};
  }
  std::string name(const std::string& dest) const { return f_.nameOf(dest); }

 private:
  const ParsedLaunchFlags& f_;
};

// Refused flags stop the launch; ignored ones become notices.
Expected<void> screenFlags(const ParsedLaunchFlags& flags, std::vector<std::string>& notices) {
  for (const auto& dest : flags.given) {
    const FlagSpec* spec = findFlagSpec(dest);
    if (spec == nullptr) continue;
    if (spec->use == FlagUse::Refuse && flags.values.at(dest) == true) {
      return makeError(flags.nameOf(dest) + ": " + std::string(spec->why));
    }
    if (spec->use == FlagUse::Notice)
      notices.push_back(flags.nameOf(dest) + " is ignored: " + std::string(spec->why));
  }
  int paradigms = 0;
  for (const char* dest : {"cpu", "multi_gpu", "tpu", "use_deepspeed", "use_fsdp"})
    paradigms += flags.values.at(dest) == true;
  if (paradigms > 1) {
    return makeError(
        "You can only use one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, `--use_fsdp` "
        "at a time.");
  }
  return {};
}

// torchrun's comma_separated_list: items between commas, ",," for a comma in one; "" is one
// empty item (which every line contains).
std::vector<std::string> commaSeparatedList(const std::string& text) {
  std::vector<std::string> items{""};
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      items.back() += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      items.back() += ',';
      ++i;
    } else {
      items.emplace_back();
    }
  }
  return items;
}

// "HOST:PORT" or "[v6]:PORT" of --rdzv_endpoint.
Expected<std::pair<std::string, std::optional<int>>> splitEndpoint(const std::string& endpoint) {
  std::string host = endpoint;
  std::optional<int> port;
  const size_t colon = endpoint.rfind(':');
  const size_t bracket = endpoint.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = endpoint.substr(0, colon);
    const auto digits = parseDigits(std::string_view(endpoint).substr(colon + 1), 65535);
    if (!digits) {
      return makeError("--rdzv_endpoint: '" + endpoint + "' is not HOST:PORT (port 0..65535)");
    }
    port = static_cast<int>(*digits);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return makeError("--rdzv_endpoint: '" + endpoint + "' has no host");
  return std::make_pair(host, port);
}

// torchrun's machine spellings onto accelerate's: --nnodes, --node_rank, --master_addr,
// --master_port, --rdzv_endpoint, --standalone.
Expected<void> machineFlags(const Reader& r, LaunchOptions& o) {
  config::ConfigOverrides& c = o.config;
  for (auto [a, b] : {std::pair{"node_rank", "machine_rank"},
                      {"master_addr", "main_process_ip"},
                      {"master_port", "main_process_port"}}) {
    if (auto ok = r.agree(a, b); !ok) return ok;
  }
  if (r.given("nnodes")) {
    const std::string text = *r.text("nnodes");
    const size_t colon = text.find(':');
    const std::string lo = text.substr(0, colon),
                      hi = colon == std::string::npos ? lo : text.substr(colon + 1);
    auto isCount = [](const std::string& s) {
      const auto n = parseDigits(s, kMaxCount);
      return n && *n > 0;
    };
    if (!isCount(lo) || !isCount(hi) || std::stoi(lo) > std::stoi(hi)) {
      return makeError(r.name("nnodes") + ": '" + text +
                       "' is not N or MIN:MAX with 0 < MIN <= MAX");
    }
    const int nodes = std::stoi(hi);
    if (lo != hi) o.min_machines = std::stoi(lo);  // elastic membership (LaunchPlan::min_machines)
    if (c.num_machines && *c.num_machines != nodes) {
      return makeError(r.name("nnodes") + " " + text + " and " + r.name("num_machines") + " " +
                       std::to_string(*c.num_machines) +
                       " contradict each other (they name the same setting)");
    }
    c.num_machines = nodes;
  }
  if (r.given("node_rank")) c.machine_rank = r.value("node_rank").get<int>();
  if (r.given("master_addr")) {
    c.main_process_ip = r.text("master_addr");
    o.address_flag = "--master_addr";
  }
  if (r.given("master_port")) c.main_process_port = r.value("master_port").get<int>();
  const auto backend = r.text("rdzv_backend");
  const bool etcd = backend && (*backend == "etcd" || *backend == "etcd-v2");
  if (auto endpoint = r.text("rdzv_endpoint"); etcd && endpoint && !endpoint->empty()) {
    o.etcd_endpoints = *endpoint;  // etcd's HOST:PORT[,HOST:PORT...] (etcd_client.h parses it)
    o.address_flag = "--rdzv_endpoint";
  } else if (endpoint && !endpoint->empty()) {
    auto split = splitEndpoint(*endpoint);
    if (!split) return std::move(split).takeError();
    if (c.main_process_ip && *c.main_process_ip != split->first) {
      return makeError("--rdzv_endpoint " + *endpoint + " and --main_process_ip/--master_addr " +
                       *c.main_process_ip + " contradict each other");
    }
    if (split->second && c.main_process_port && *c.main_process_port != *split->second) {
      return makeError("--rdzv_endpoint " + *endpoint + " and --main_process_port/--master_port " +
                       std::to_string(*c.main_process_port) + " contradict each other");
    }
    c.main_process_ip = split->first;
    if (split->second) c.main_process_port = split->second;
    o.address_flag = "--rdzv_endpoint";
  }
  if (r.on("standalone")) {  // torchrun's: one machine, the store on a free port
    if (c.num_machines && *c.num_machines > 1)
      return makeError("--standalone runs on one machine, but --nnodes/--num_machines is " +
                       std::to_string(*c.num_machines));
    c.num_machines = 1;
    c.main_process_port = 0;  // a free port, as torchrun's standalone store
  }
  return {};
}

Expected<void> configFlags(const Reader& r, LaunchOptions& o) {
  config::ConfigOverrides& c = o.config;
  c.config_file = r.text("config_file");
  c.cpu = r.on("cpu");
  c.multi_gpu = r.on("multi_gpu");
  if (r.on("use_deepspeed")) c.distributed_type = "DEEPSPEED";
  if (r.on("use_fsdp")) c.distributed_type = "FSDP";
  if (r.on("use_megatron_lm") && !r.on("use_deepspeed") && !r.on("use_fsdp"))
    c.distributed_type = "MEGATRON_LM";
  c.enable_cpu_affinity = r.on("enable_cpu_affinity");
  c.debug = r.on("debug");
  c.mixed_precision = r.text("mixed_precision");
  c.gpu_ids = r.text("gpu_ids");
  if (r.given("rdzv_backend")) c.rdzv_backend = r.text("rdzv_backend");
  if (r.given("same_network")) c.same_network = true;
  for (auto [dest, field] : {std::pair{"num_processes", &c.num_processes},
                             {"num_machines", &c.num_machines},
                             {"machine_rank", &c.machine_rank},
                             {"main_process_port", &c.main_process_port}}) {
    auto v = r.number<int>(
        dest, dest == std::string("num_processes") || dest == std::string("num_machines") ? 1 : 0,
        dest == std::string("main_process_port") ? 65535 : 1 << 20);
    if (!v) return std::move(v).takeError();
    *field = *v;
  }
  c.main_process_ip = r.text("main_process_ip");
  if (r.on("multi_gpu") && c.num_processes && *c.num_processes < 2) {
    return makeError("You need to use at least 2 processes to use `--multi_gpu`.");
  }
  if (r.on("use_parallelism_config") && (!r.on("use_fsdp") || r.text("fsdp_version") == "1")) {
    return makeError(
        "You cannot use `--use_parallelism_config` without `--use_fsdp` and `--fsdp_version=2`.");
  }
  return {};
}

// accel's and torchrun's flags about the agent itself.
// Flag `name`'s seconds when given (or defaulted), which must be more than 0.
Expected<std::optional<double>> positiveSeconds(const Reader& r, const char* name) {
  if (r.value(name).is_null()) return std::optional<double>();
  const double seconds = r.value(name).get<double>();
  if (!(seconds > 0)) return makeError(std::string("--") + name + ": must be more than 0 seconds");
  return std::optional<double>(seconds);
}

// --straggler_threshold (0 to 1), --straggler_window (steps) and --straggler_action.
Expected<void> stragglerFlags(const Reader& r, LaunchOptions& o) {
  auto threshold = r.number<double>("straggler_threshold", 0.0, 1.0);
  if (!threshold) return std::move(threshold).takeError();
  if (*threshold) o.straggler_threshold = **threshold;
  auto window = r.number<int>("straggler_window", 2, 1 << 20);
  if (!window) return std::move(window).takeError();
  if (*window) o.straggler_window = **window;
  o.straggler_exclude = r.text("straggler_action") == "exclude";
  return {};
}

// --hang_timeout and --exit_timeout (unset: the config's or none), and the health checks:
// --health_check, its interval and timeout.
Expected<void> watchdogFlags(const Reader& r, LaunchOptions& o) {
  for (auto [name, field] : {std::pair{"hang_timeout", &o.hang_timeout_s},
                             std::pair{"exit_timeout", &o.exit_timeout_s}}) {
    auto seconds = positiveSeconds(r, name);
    if (!seconds) return std::move(seconds).takeError();
    *field = *seconds;
  }
  for (auto [name, field] : {std::pair{"health_check_interval", &o.health_check_interval_s},
                             std::pair{"health_check_timeout", &o.health_check_timeout_s}}) {
    auto seconds = positiveSeconds(r, name);
    if (!seconds) return std::move(seconds).takeError();
    if (*seconds) *field = **seconds;
  }
  o.health_check = r.text("health_check");
  if (auto dirs = r.text("health_check_dirs")) {
    for (auto dir : splitOn(*dirs, ',')) {
      if (dir.empty())
        return makeError("--health_check_dirs: an empty directory in '" + *dirs + "'");
      o.health_check_dirs.emplace_back(dir);
    }
  }
  return stragglerFlags(r, o);
}

Expected<void> agentFlags(const Reader& r, LaunchOptions& o) {
  if (auto nproc = r.text("nproc_per_node")) {
    const std::string& n = *nproc;
    const auto counted = parseDigits(n, kMaxCount);
    const bool count = counted && *counted > 0;
    if (!count && n != "auto" && n != "gpu" && n != "cpu") {
      return makeError(r.name("nproc_per_node") + ": '" + n +
                       "' is not a positive count, auto, gpu or cpu");
    }
    o.nproc_per_node = n;
  }
  o.rdzv_id = r.given("rdzv_id") ? r.text("rdzv_id") : std::nullopt;
  o.run_path = r.on("run_path");
  o.module = r.on("module");
  o.no_python = r.on("no_python");
  o.python = r.text("python");
  o.local_addr = r.text("local_addr");
  auto threads = r.number<int>("num_cpu_threads_per_process", 1, 1 << 16);
  if (!threads) return std::move(threads).takeError();
  o.num_cpu_threads_per_process = *threads;
  auto steps = r.number<int>("gradient_accumulation_steps", 1, 1 << 30);
  if (!steps) return std::move(steps).takeError();
  o.gradient_accumulation_steps = *steps;
  auto restarts = r.number<int>("max_restarts", 0, 1 << 20);
  if (!restarts) return std::move(restarts).takeError();
  o.max_restarts = restarts->value_or(0);
  o.monitor_interval = r.value("monitor_interval").get<double>();
  o.log_dir = r.text("log_dir");
  // torchrun's --redirects/--tee (checked against the local world size by the plan) and accel's
  // console mask (what --tee meant before).
  if (r.given("redirects")) o.redirects = r.text("redirects");
  if (r.given("tee")) o.tee = r.text("tee");
  auto consoleStreams = r.number<int>("console_streams", 0, 3);
  if (!consoleStreams) return std::move(consoleStreams).takeError();
  o.console_streams = *consoleStreams;
  if (auto filter = r.text("local_ranks_filter"); filter && !filter->empty())
    o.local_ranks_filter = filter;
  o.quiet = r.on("quiet");
  o.retry_identical_failures = r.on("retry_identical_failures");
  o.rdzv_conf = r.text("rdzv_conf").value_or("");
  o.rdzv_timeout_s = r.value("rdzv_timeout").is_null()
                         ? std::nullopt
                         : std::optional<double>(r.value("rdzv_timeout").get<double>());
  o.role = r.text("role").value_or("default");
  o.dry_run = r.on("dry_run") || r.on("dry_run_json");
  o.dry_run_json = r.on("dry_run_json");
  auto gpus = r.number<int>("dry_run_gpus", 0, 1 << 16);
  if (!gpus) return std::move(gpus).takeError();
  o.dry_run_gpus = *gpus;
  if (o.dry_run_gpus && !o.dry_run)
    return makeError("--dry_run_gpus: only with --dry_run or --dry_run_json");
  o.no_spawn = r.on("no_spawn");
  const double term = r.value("term_timeout").get<double>();
  if (!(term >= 0)) return makeError("--term_timeout: must be 0 or more");
  o.term_timeout = std::chrono::milliseconds(static_cast<long long>(term * 1000));
  o.term_timeout_given = r.given("term_timeout");
  if (auto ok = r.agree("term_timeout", "shutdown_timeout"); !ok) return ok;
  if (r.given("shutdown_timeout")) {
    const int seconds = r.value("shutdown_timeout").get<int>();
    if (seconds < 0) return makeError(r.name("shutdown_timeout") + ": must be 0 or more");
    o.term_timeout = std::chrono::seconds(seconds);
    o.term_timeout_given = true;
  }
  o.virtual_local_rank = r.on("virtual_local_rank");
  for (int stream = 0; stream < 2; ++stream) {
    const char* dest = stream == 0 ? "duplicate_stdout_filters" : "duplicate_stderr_filters";
    if (auto text = r.text(dest)) o.duplicate_filters[stream] = commaSeparatedList(*text);
  }
  if (auto ok = watchdogFlags(r, o); !ok) return ok;
  o.store_connection_input_limit = r.text("store_connection_input_limit");
  o.store_input_budget = r.text("store_input_budget");
  return {};
}

}  // namespace

Expected<LaunchOptions> launchOptionsFrom(ParsedLaunchFlags flags) {
  LaunchOptions o;
  o.mode = flags.mode;
  if (auto ok = screenFlags(flags, o.notices); !ok) return std::move(ok).takeError();
  Reader r(flags);
  if (auto ok = configFlags(r, o); !ok) return std::move(ok).takeError();
  if (auto ok = machineFlags(r, o); !ok) return std::move(ok).takeError();
  if (auto ok = agentFlags(r, o); !ok) return std::move(ok).takeError();
  o.command = flags.command;
  o.nproc_per_node_flag = flags.nameOf("nproc_per_node");
  o.accelerate.values = std::move(flags.values);
  o.accelerate.given = std::move(flags.given);
  return o;
}

}  // namespace accel::launcher
