#include "apps/accel/test_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "apps/accel/launch_command.h"
#include "apps/accel/messages.h"

namespace accel::apps {
namespace {

// Each check prints "NAME: ok (...)" or "NAME: FAILED (...)" and a failure ends the rank with
// code 1. One process without RANK (accelerate's single-process launch) is a group of one.
constexpr const char* kScript = R"PY(import datetime, os, sys, tempfile


def check(name, ok, detail):
    print(f"{name}: {'ok' if ok else 'FAILED'} ({detail})", flush=True)
    if not ok:
        sys.exit(1)


try:
    import torch
    import torch.distributed as dist
except Exception as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)  # accel launch's hint reads it
    check("torch", False, f"{sys.executable} cannot import torch: {e}")
check("torch", dist.is_available(), f"torch {torch.__version__} in {sys.executable}")
env = os.environ
if "RANK" in env:
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
    missing = [k for k in names if not env.get(k)]
    if missing:
        check("environment", False, "missing " + ", ".join(missing))
    rank, local, world, local_world = (int(env[k]) for k in names[:4])
    check("environment", 0 <= rank < world and 0 <= local < local_world <= world,
          f"rank {rank} of {world}, local rank {local} of {local_world}, "
          f"store {env['MASTER_ADDR']}:{env['MASTER_PORT']}")
    init = "env://"
else:
    rank, local, world = 0, 0, 1
    check("environment", True, "one process without RANK, as accelerate starts one: a group of one")
    init = "file://" + tempfile.mktemp(prefix="accel-test-")
use_cpu = env.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
backend = "nccl" if torch.cuda.is_available() and not use_cpu else "gloo"
if backend == "nccl":
    torch.cuda.set_device(local)
dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
check("init_process_group", True, f"{backend}, {world} rank(s)")
device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
t = torch.tensor([float(rank + 1)], device=device)
dist.all_reduce(t)
want = world * (world + 1) / 2
check("all_reduce", t.item() == want, f"sum of rank+1 over {world} rank(s): {t.item():g}, want {want:g}")
dist.barrier()
check("barrier", True, "every rank arrived")
dist.destroy_process_group()
)PY";

// The script in a file of its own under $TMPDIR (else /tmp); "" when it cannot be written.
std::string writeScript(std::string& error) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/accel-test-XXXXXX.py";
  int fd = ::mkstemps(path.data(), 3);
  if (fd < 0) {
    error = "cannot write the test script '" + path + "': " + std::strerror(errno);
    return "";
  }
  const std::string text = kScript;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (written) return path;
  error = "cannot write the test script '" + path + "'";
  ::unlink(path.c_str());
  return "";
}

// libaccel's check program (apps/accel_check): $ACCEL_CHECK_PROGRAM, else beside this accel —
// installed (../libexec/accel/accel-check) or in the build tree (../accel_check/accel-check).
// "" when none is there; `looked` says where it looked.
std::string findCheckProgram(std::string& looked) {
  if (const char* given = std::getenv("ACCEL_CHECK_PROGRAM"); given && *given) return given;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* relative : {"/../libexec/accel/accel-check", "/../accel_check/accel-check"}) {
    const std::string path = dir + relative;
    char resolved[4096];
    if (::access(path.c_str(), X_OK) == 0 && ::realpath(path.c_str(), resolved)) return resolved;
    looked += (looked.empty() ? "" : ", ") + path;
  }
  return "";
}

std::vector<std::string> configArgs(const TestCommandOptions& o) {
  if (!o.config_file) return {};
  return {"--config_file", *o.config_file};
}

int launchShown(const std::vector<std::string>& args) {
  std::string shown = "accel launch";
  for (const auto& a : args) shown += " " + a;
  std::cout << "Running: " << shown << std::endl;
  return runLaunchArgs(args, launcher::LaunchMode::Accelerate);
}

// The python3-torch checks (kScript) under launch: its exit code.
int runTorchChecks(const TestCommandOptions& o) {
  std::string error;
  const std::string script = writeScript(error);
  if (script.empty()) {
    printError(error);
    return 1;
  }
  std::vector<std::string> args = configArgs(o);
  if (o.python) args.insert(args.end(), {"--python", *o.python});
  args.push_back(script);
  const int code = launchShown(args);
  ::unlink(script.c_str());
  if (code != 0) {
    printError("accel test failed: accel launch exited " + std::to_string(code) +
               " (the lines above say which check failed on which rank)");
  }
  return code;
}

// libaccel's checks (accel-check) under launch with the same config: its exit code, 0 with a
// "skipped" line when this accel has no check program beside it.
int runLibaccelChecks(const TestCommandOptions& o) {
  std::string looked;
  const std::string program = findCheckProgram(looked);
  if (program.empty()) {
    std::cout << "libaccel: skipped (no accel-check beside this accel; looked at " << looked << ")"
              << std::endl;
    return 0;
  }
  std::vector<std::string> args = configArgs(o);
  args.insert(args.end(), {"--no_python", program});
  const int code = launchShown(args);
  if (code != 0) {
    printError("accel test failed: libaccel's check exited " + std::to_string(code) +
               " (the lines above say which check failed on which rank)");
  }
  return code;
}

}  // namespace

void registerTestCommand(CLI::App& app, TestCommandOptions& o) {
  o.command = app.add_subcommand(
      "test",
      "Check a config with a short distributed job (torch, environment, all_reduce, barrier; "
      "then libaccel's communicator)");
  o.command->add_option("--config_file,--config-file", o.config_file,
                        "The config to test (default: the one accel launch reads)");
  o.command->add_option("--python", o.python,
                        "The interpreter with torch (default: the one accel launch uses)");
}

// The parts in order, stopping at the first that fails (its code is the command's).
int runTestCommand(const TestCommandOptions& o) {
  if (const int torchCode = runTorchChecks(o); torchCode != 0) return torchCode;
  if (const int libaccelCode = runLibaccelChecks(o); libaccelCode != 0) return libaccelCode;
  std::cout << "Test is a success! You are ready for your distributed training!" << std::endl;
  return 0;
}

}  // namespace accel::apps
