// How the agent itself behaves (plan_steps.h): console and log streams, restarts, the run id,
// the store's memory bounds, watchdog timeouts and rendezvous timeouts.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <tuple>

#include "config/schema.h"
#include "launcher/base/defaults.h"
#include "launcher/base/numbers.h"
#include "launcher/base/text.h"
#include "launcher/plan/plan_steps.h"
#include "launcher/plan/stream_masks.h"
#include "launcher/plan/worker_env.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/common/env_names.h"
#include "probes/run_program.h"
#include "probes/scheduler_env.h"
#include "probes/system_info.h"

namespace accel::launcher::detail {
namespace {

// A fresh id for TORCHELASTIC_RUN_ID (torchrun's default "none" lets separate jobs collide).
std::string newRunId() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned> digit(0, 15);
  std::string id = "accel-";
  for (int i = 0; i < 12; ++i) id += "0123456789abcdef"[digit(rd)];
  return id;
}

Expected<std::set<int>> parseRankFilter(const std::string& text, int localWorldSize) {
  std::set<int> ranks;
  for (std::string_view view : splitOn(text, ',')) {
    const std::string item(view);
    const auto rank = parseDigits(item, localWorldSize - 1);
    if (!rank) {
      return makeError("--local_ranks_filter: '" + item + "' is not a local rank (0.." +
                       std::to_string(localWorldSize - 1) + ")");
    }
    ranks.insert(static_cast<int>(*rank));
  }
  return ranks;
}

// What accel reads of torchrun's --rdzv_conf k=v,...: the rendezvous timeout (timeout=, or
// join_timeout= as torch's c10d backend spells it), is_host= (torch's booleans), and the
// membership settings torch's dynamic rendezvous reads: last_call_timeout=, close_timeout=,
// keep_alive_interval= (seconds) and keep_alive_max_attempt=.
struct RdzvConf {
  std::optional<double> timeout_s;
  std::optional<bool> is_host;
  std::optional<double> last_call_s, keep_alive_interval_s, close_s;
  std::optional<int> keep_alive_attempts;
  std::optional<bool> https;                     // protocol=http|https (etcd's)
  std::optional<std::string> cacert, cert, key;  // etcd's TLS files
};

// Every key --rdzv_conf takes: accel's (above), then those of torch's rendezvous backends that
// accel accepts without acting on them (its store needs no read timeout, no libuv switch; TLS
// and the static rank are etcd's and the static backend's).
constexpr std::string_view kConfKeys[] = {"timeout",
                                          "join_timeout",
                                          "last_call_timeout",
                                          "close_timeout",
                                          "keep_alive_interval",
                                          "keep_alive_max_attempt",
                                          "is_host",
                                          "read_timeout",
                                          "use_libuv",
                                          "rank",
                                          "protocol",
                                          "cacert",
                                          "cert",
                                          "key"};

// An item whose key is neither accel's nor torch's: an error with the closest known key.
std::string unknownConfKey(const std::string& key) {
  std::string closest;
  size_t best = std::max<size_t>(2, key.size() / 3) + 1;
  std::string known;
  for (std::string_view k : kConfKeys) {
    known += (known.empty() ? "" : ", ") + std::string(k);
    if (const size_t d = config::editDistance(key, k); d < best) {
      best = d;
      closest = k;
    }
  }
  return "--rdzv_conf: unknown key '" + key + "'" +
         (closest.empty() ? "" : "; did you mean '" + closest + "'?") + " (known: " + known + ")";
}

// SECONDS > 0 of an item "key=SECONDS".
Expected<double> confSeconds(const std::string& item, const std::string& key,
                             const std::string& value) {
  char* end = nullptr;
  const double seconds = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(seconds > 0))
    return makeError("--rdzv_conf: '" + item + "' is not " + key + "=SECONDS (more than 0)");
  return seconds;
}

// One item KEY=VALUE of --rdzv_conf into `conf` (torch's rule: a key and a value, both needed).
Expected<void> readConfItem(const std::string& item, RdzvConf& conf) {
  const size_t eq = item.find('=');
  const std::string key(trimmed(item.substr(0, eq))),
      value = eq == std::string::npos ? "" : std::string(trimmed(item.substr(eq + 1)));
  if (key.empty() || value.empty()) {
    return makeError("--rdzv_conf: '" + item +
                     "' is not KEY=VALUE (the whole flag: KEY=VALUE,KEY=VALUE,...)");
  }
  if (key == "timeout" || key == "join_timeout" || key == "last_call_timeout" ||
      key == "keep_alive_interval" || key == "close_timeout") {
    auto seconds = confSeconds(item, key, value);
    if (!seconds) return std::move(seconds).takeError();
    (key == "last_call_timeout"     ? conf.last_call_s
     : key == "keep_alive_interval" ? conf.keep_alive_interval_s
     : key == "close_timeout"       ? conf.close_s
                                    : conf.timeout_s) = *seconds;
  } else if (key == "keep_alive_max_attempt") {
    auto n = parseDigits(value, 1000);
    if (!n || *n == 0)
      return makeError("--rdzv_conf: '" + item + "' is not keep_alive_max_attempt=N (1 to 1000)");
    conf.keep_alive_attempts = static_cast<int>(*n);
  } else if (key == "is_host") {
    const std::string v = lowerCase(value);
    if (v == "1" || v == "true" || v == "t" || v == "yes" || v == "y") {
      conf.is_host = true;
    } else if (v == "0" || v == "false" || v == "f" || v == "no" || v == "n") {
      conf.is_host = false;
    } else {
      return makeError("--rdzv_conf: '" + item + "' is not is_host=true|false");
    }
  } else if (std::find(std::begin(kConfKeys), std::end(kConfKeys), key) == std::end(kConfKeys)) {
    return makeError(unknownConfKey(key));
  } else if (key == "protocol") {
    const std::string v = lowerCase(value);
    if (v != "http" && v != "https")
      return makeError("--rdzv_conf: '" + item + "' is not protocol=http|https");
    conf.https = v == "https";
  } else if (key == "cacert" || key == "cert" || key == "key") {
    (key == "cacert" ? conf.cacert : key == "cert" ? conf.cert : conf.key) = value;
  }
  return {};
}

Expected<RdzvConf> parseRdzvConf(const std::string& text) {
  RdzvConf conf;
  if (trimmed(text).empty()) return conf;
  for (std::string_view view : splitOn(text, ',')) {
    if (auto ok = readConfItem(std::string(view), conf); !ok) return std::move(ok).takeError();
  }
  return conf;
}

// etcd's TLS from --rdzv_conf into the plan: protocol=https (or https:// endpoints) with cacert,
// cert and key as torch's etcd backends take them. TLS files with TLS off are an error: torch
// would ignore them and speak plain HTTP, which the user did not mean.
Expected<void> applyEtcdTls(LaunchPlan& plan, const RdzvConf& conf) {
  if (!plan.etcd_endpoints) return {};
  const bool httpsEndpoint = plan.etcd_endpoints->find("https://") != std::string::npos;
  plan.etcd_https = conf.https.value_or(httpsEndpoint);
  if (!plan.etcd_https && httpsEndpoint) {
    return makeError("--rdzv_conf protocol=http with an https:// --rdzv_endpoint (" +
                     *plan.etcd_endpoints + "): say one");
  }
  const auto file = conf.cacert ? "cacert=" + *conf.cacert
                    : conf.cert ? "cert=" + *conf.cert
                    : conf.key  ? "key=" + *conf.key
                                : "";
  if (!plan.etcd_https && !file.empty()) {
    return makeError("--rdzv_conf " + file +
                     " is for TLS, which is off: add protocol=https (or give https:// endpoints)");
  }
  plan.etcd_cacert = conf.cacert.value_or("");
  plan.etcd_cert = conf.cert.value_or("");
  plan.etcd_key = conf.key.value_or("");
  return {};
}

// --rdzv_timeout, else timeout= in --rdzv_conf (torchrun's spelling), else 900 s.
Expected<std::chrono::milliseconds> rdzvTimeout(const LaunchOptions& o, const RdzvConf& conf) {
  const double seconds = o.rdzv_timeout_s.value_or(conf.timeout_s.value_or(900));
  if (!(seconds > 0)) return makeError("--rdzv_timeout: must be more than 0 seconds");
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

// "128M", "1G", "65536": a size in bytes (K, M, G are powers of 1024; "KiB"/"MB" spellings too).
Expected<uint64_t> parseByteSize(const std::string& flag, const std::string& text) {
  size_t end = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  const std::string unit = upperCase(text.substr(end));
  const std::vector<std::pair<std::vector<std::string>, int>> units = {
      {{"", "B"}, 0}, {{"K", "KB", "KIB"}, 10}, {{"M", "MB", "MIB"}, 20}, {{"G", "GB", "GIB"}, 30}};
  for (const auto& [names, shift] : units) {
    if (end == 0 || std::find(names.begin(), names.end(), unit) == names.end()) continue;
    if (value > (~0ull >> shift)) break;
    return static_cast<uint64_t>(value) << shift;
  }
  return makeError(flag + ": '" + text + "' is not a size (bytes, or a number with K, M or G)");
}

// The job store's memory bounds; the store needs room for one request of the longest value.
Expected<void> applyStoreLimits(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.store_connection_input_limit) {
    auto bytes = parseByteSize("--store_connection_input_limit", *o.store_connection_input_limit);
    if (!bytes) return std::move(bytes).takeError();
    plan.store_connection_input_bytes = *bytes;
  }
  if (o.store_input_budget) {
    auto bytes = parseByteSize("--store_input_budget", *o.store_input_budget);
    if (!bytes) return std::move(bytes).takeError();
    plan.store_input_budget_bytes = *bytes;
  }
  const uint64_t least = store::TcpStoreServerOptions{}.leastConnectionInputBytes();
  if (plan.store_connection_input_bytes < least) {
    return makeError("--store_connection_input_limit: must be at least " + std::to_string(least) +
                     " bytes (64 MiB, the longest value the store takes, plus 1 KiB)");
  }
  if (plan.store_input_budget_bytes < plan.store_connection_input_bytes) {
    return makeError(
        "--store_input_budget: " + std::to_string(plan.store_input_budget_bytes) +
        " bytes is less than one connection may hold (--store_connection_input_limit " +
        std::to_string(plan.store_connection_input_bytes) + ")");
  }
  return {};
}

// The numeric ranges were checked where the flags were read (cli/options_from_flags.cc); what
// depends on the job's size is checked here.
Expected<void> applyAgentFlags(LaunchPlan& plan, const LaunchOptions& o) {
  plan.console_streams = o.console_streams.value_or(3);
  for (auto [flag, text, masks] : {std::tuple{"--redirects", &o.redirects, &plan.redirects},
                                   std::tuple{"--tee", &o.tee, &plan.tee}}) {
    auto parsed = parseStreamMasks(flag, text->value_or("0"), plan.local_world_size);
    if (!parsed) return std::move(parsed).takeError();
    *masks = std::move(*parsed);
  }
  if (o.local_ranks_filter) {
    auto ranks = parseRankFilter(*o.local_ranks_filter, plan.local_world_size);
    if (!ranks) return std::move(ranks).takeError();
    plan.console_ranks = std::move(*ranks);
  }
  plan.max_restarts = o.max_restarts;
  plan.retry_identical_failures = o.retry_identical_failures;
  plan.duplicate_filters = o.duplicate_filters;
  plan.role = o.role;
  // The run id names the log directory (<run_id>_<random>): one path component.
  if (o.rdzv_id && (o.rdzv_id->empty() || o.rdzv_id->find('/') != std::string::npos)) {
    return makeError("--rdzv_id: '" + *o.rdzv_id + "' must be a non-empty name without '/'");
  }
  plan.log_dir = o.log_dir;
  // A rank per task: only rank 0 speaks for the job (hundreds of tasks must not repeat it).
  plan.quiet = o.quiet || (plan.exec_in_place && plan.exec_rank != 0);
  plan.dry_run = o.dry_run;
  plan.term_timeout = o.term_timeout;
  return applyStoreLimits(plan, o);
}

// Every machine of a job must agree on the run id without talking: the scheduler's job id, or
// one derived from the shared store address.
void chooseRunId(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.rdzv_id) plan.run_id = *o.rdzv_id;
  if (!plan.run_id.empty()) plan.rendezvous_id = plan.run_id;
  if (!plan.run_id.empty()) return;
  plan.run_id = plan.num_machines > 1 ? "accel-" + plan.master_addr + "-" +
                                            std::to_string(plan.master_port.value_or(0))
                                      : newRunId();
}

// --hang_timeout and --exit_timeout, else the config file's keys of the same names (accel's
// own: accelerate does not know them), in seconds; --health_check and its interval and timeout.
void applyWatchdogTimeouts(LaunchPlan& plan, const LaunchOptions& o) {
  const auto& extras = plan.config.config.extras;
  for (auto [name, flag, field] :
       {std::tuple{"hang_timeout", o.hang_timeout_s, &plan.hang_timeout},
        std::tuple{"exit_timeout", o.exit_timeout_s, &plan.exit_timeout}}) {
    std::optional<double> seconds = flag;
    if (auto it = extras.find(name); !seconds && it != extras.end() && it->second.is_number()) {
      seconds = it->second.get<double>();  // the schema has checked it is at least 1
    }
    if (seconds) *field = std::chrono::milliseconds(static_cast<long long>(*seconds * 1000));
  }
  plan.health_check = o.health_check;
  plan.health_check_dirs = o.health_check_dirs;
  plan.health_check_interval =
      std::chrono::milliseconds(static_cast<long long>(o.health_check_interval_s * 1000));
  plan.health_check_timeout =
      std::chrono::milliseconds(static_cast<long long>(o.health_check_timeout_s * 1000));
  plan.straggler_threshold = o.straggler_threshold;
  plan.straggler_window = o.straggler_window;
  plan.straggler_exclude = o.straggler_exclude;
}

// How long agents wait for each other, and notices for torchrun flags that do nothing here.
Expected<void> applyRendezvousFlags(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.monitor_interval != 0.1) {
    plan.notices.push_back(
        "--monitor_interval is ignored: accel reacts to worker exits as they happen");
  }
  auto conf = parseRdzvConf(o.rdzv_conf);
  if (!conf) return std::move(conf).takeError();
  auto timeout = rdzvTimeout(o, *conf);
  if (!timeout) return std::move(timeout).takeError();
  plan.store_host_configured = conf->is_host;
  auto ms = [](double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  };
  // After applyShutdownTimeoutEnv: --term_timeout is final.
  RoundTimeouts& t = plan.round_timeouts;
  t.join = *timeout;
  if (conf->last_call_s) t.last_call = ms(*conf->last_call_s);
  if (conf->keep_alive_interval_s) t.keep_alive_interval = ms(*conf->keep_alive_interval_s);
  if (conf->keep_alive_attempts) t.keep_alive_misses = *conf->keep_alive_attempts;
  t.close = conf->close_s ? ms(*conf->close_s) : plan.term_timeout + t.close_margin;
  t.exit_after_failure = plan.term_timeout + t.exit_margin;
  if (auto tls = applyEtcdTls(plan, *conf); !tls) return tls;
  if (plan.num_machines == 1 && (!o.rdzv_conf.empty() || o.rdzv_timeout_s ||
                                 plan.config.sources["rdzv_backend"] == config::Source::Flag)) {
    plan.notices.push_back(
        "--rdzv_backend/--rdzv_conf/--rdzv_timeout have no effect on a single machine");
  }
  return {};
}

Expected<void> applyShutdownTimeoutEnv(LaunchPlan& plan, const LaunchOptions& o,
                                       const probes::Environment& env) {
  auto text = probes::lookup(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  if (o.term_timeout_given || !text) return {};
  const auto seconds = parseDigits(*text, 1 << 20);
  if (!seconds) {
    return makeError("TORCH_ELASTIC_SHUTDOWN_TIMEOUT: '" + *text +
                     "' is not a number of seconds (0 or more)");
  }
  plan.term_timeout = std::chrono::seconds(*seconds);
  return {};
}

}  // namespace accel::launcher::detail
