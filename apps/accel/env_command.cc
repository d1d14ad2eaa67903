#include "apps/accel/env_command.h"

#include <chrono>
#include <iostream>

#include "accel_build_info.h"
#include "accel_git_revision.h"
#include "probes/env_report.h"
#include "probes/net_check.h"
#include "probes/ports.h"
#include "probes/preflight.h"

namespace accel::apps {
namespace {

std::string compilerName() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

// The launcher's network checks, for the port and network items.
probes::NetworkProbes launcherNetwork() {
  probes::NetworkProbes net;
  net.port_free = [](int port) { return probes::checkPortFree(port); };
  net.route = [](const std::string& host) -> Expected<std::string> {
    auto route = probes::routeTo(host);
    if (!route) return std::move(route).takeError();
    return probes::describeInterface(*route);
  };
  net.reach = [](const std::string& host, int port) -> Expected<void> {
    // One try: the master may legitimately start later, so this only informs.
    auto reached = probes::waitForListener(host, port, std::chrono::seconds(2),
                                           std::chrono::hours(1), [](const std::string&) {});
    if (!reached) return std::move(reached).takeError();
    return {};
  };
  return net;
}

int runCheck(const EnvCommandOptions& o) {
  probes::PreflightOptions options{o.config_file, config::PathEnv::fromProcess(), o.python,
                                   ACCEL_CUDA_VERSION, launcherNetwork()};
  auto items = probes::runPreflight(options);
  if (o.json) {
    std::cout << probes::renderPreflightJson(items).dump(2, ' ', false,
                                                         nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << probes::renderPreflightText(items);
  }
  return probes::preflightOk(items) ? 0 : 1;
}

}  // namespace

void registerEnvCommand(CLI::App& app, EnvCommandOptions& o) {
  o.command =
      app.add_subcommand("env", "Print versions, hardware and the config in use (for bug reports)");
  o.command->add_option("--config_file,--config-file", o.config_file,
                        "Config file to report instead of the default");
  o.command->add_flag("--json", o.json, "Print JSON");
  CLI::Option* check =
      o.command->add_flag("--check", o.check,
                          "Preflight checks for accel launch (config, GPUs, driver, port, network, "
                          "/dev/shm, ulimit -n, "
                          "python3/torch): OK/WARN/FAIL with a fix each; exit 1 on FAIL");
  o.command
      ->add_option(
          "--python", o.python,
          "With --check: the interpreter to check (default: the one launch uses: the config's "
          "accel_python, $PYTHON_EXEC, else python3 or, where it has no torch, one that has)")
      ->needs(check);
}

int runEnvCommand(const EnvCommandOptions& o) {
  if (o.check) return runCheck(o);
  probes::BuildInfo build{ACCEL_VERSION,    ACCEL_GIT_REVISION,  compilerName(),
                          ACCEL_BUILD_TYPE, ACCEL_TORCH_VERSION, ACCEL_WITH_NCCL_BUILT != 0};
  auto report = probes::collectEnvReport(build, o.config_file, config::PathEnv::fromProcess());
  if (o.json) {
    std::cout << probes::renderEnvJson(report).dump(2, ' ', false,
                                                    nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << probes::renderEnvText(report);
  }
  return report.config.error.empty() ? 0 : 1;
}

}  // namespace accel::apps
