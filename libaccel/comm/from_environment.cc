#include "libaccel/comm/from_environment.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "accel/error.h"
#include "libaccel/comm/device_choice.h"
#include "libaccel/comm/gloo_communicator.h"
#include "libaccel/comm/hierarchical_communicator.h"
#include "libaccel/comm/shm_communicator.h"
#include "libaccel/comm/torch_tcp_store.h"
#include "libaccel/common/env_names.h"
#include "libaccel/common/env_values.h"
#ifdef ACCEL_HAVE_NCCL
#include "libaccel/comm/nccl_communicator.h"
#endif

namespace accel::comm {
namespace {

// The job's store: under `accel launch` the agent hosts it; without an agent (a rank per
// scheduler task, --no_spawn) rank 0 does, as in torch's env:// init.
c10::intrusive_ptr<c10d::Store> jobStore(int rank, std::chrono::milliseconds timeout) {
  auto addr = env::getString(env::kMasterAddr);
  auto port = env::getInt(env::kMasterPort, -1);
  ACCEL_CHECK(addr && port > 0, env::kMasterAddr, " and ", env::kMasterPort, " must be set when ",
              env::kWorldSize, " > 1 (run under accel launch)");
  const bool agentStore = env::getString(env::kUseAgentStore).value_or("") == "True";
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = !agentStore && rank == 0;
  options.waitWorkers = false;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = makeTorchTcpStore(*addr, options);
  } catch (const std::exception& e) {
    throw NetworkError("rank " + std::to_string(rank) + ": cannot reach the job's store at " +
                       *addr + ":" + std::to_string(port) + ": " + e.what());
  }
  if (agentStore) {
    store = c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + env::getString(env::kRestartCount).value_or("0"), store);
  }
  return c10::make_intrusive<c10d::PrefixStore>("accel", store);
}

enum class Choice { SharedMemory, Hierarchical, Gloo };

// Shared memory when every rank runs on this machine (auto or shm); with several machines and
// more than one rank on each, shared memory inside them and Gloo between them when asked (shm)
// or on auto (README: measured on two hosts); Gloo otherwise.
Choice choose(CpuBackend backend, int world, int localWorld) {
  if (backend == CpuBackend::Gloo) return Choice::Gloo;
  if (localWorld == world) return Choice::SharedMemory;
  if (localWorld > 1 && world % localWorld == 0) return Choice::Hierarchical;
  if (backend == CpuBackend::SharedMemory) {
    throw Error(std::string(env::kCpuBackend) +
                "=shm needs the same number (LOCAL_WORLD_SIZE=" + std::to_string(localWorld) +
                ") of ranks on every machine, more than one; use gloo");
  }
  return Choice::Gloo;
}

}  // namespace

CpuBackend cpuBackendFromEnvironment() {
  const std::string v = env::getString(env::kCpuBackend).value_or("auto");
  if (v == "auto") return CpuBackend::Auto;
  if (v == "shm") return CpuBackend::SharedMemory;
  if (v == "gloo") return CpuBackend::Gloo;
  throw Error(std::string(env::kCpuBackend) + "='" + v + "' is not one of auto, shm, gloo");
}

shm::Stores shmStoresFromEnvironment() {
  const std::string v = env::getString(env::kShmStores).value_or("auto");
  if (v == "auto") return shm::Stores::Auto;
  if (v == "plain") return shm::Stores::Plain;
  if (v == "streaming") return shm::Stores::Streaming;
  throw Error(std::string(env::kShmStores) + "='" + v + "' is not one of auto, plain, streaming");
}

std::shared_ptr<Communicator> communicatorFromEnvironment(const EnvironmentOptions& options) {
  const int world = env::getInt(env::kWorldSize, 1);
  if (world <= 1) return makeSingleProcessCommunicator();
  const int rank = env::getInt(env::kRank, -1);
  ACCEL_CHECK(rank >= 0 && rank < world, env::kRank, " must be in [0, ", world, ") but is ", rank);
  const CpuBackend backend = options.cpu_backend.value_or(cpuBackendFromEnvironment());
  auto store = jobStore(rank, options.timeout);
#ifdef ACCEL_HAVE_NCCL
  const c10::Device device = chooseDevice(deviceFactsFromEnvironment(options.cpu_only)).device;
  if (device.is_cuda())
    return makeNcclCommunicator(store, rank, world, device.index(), options.timeout);
#endif
  const int localWorld = env::getInt(env::kLocalWorldSize, 1);
  const Choice choice = choose(backend, world, localWorld);
  ShmOptions shm;
  shm.timeout = options.timeout;
  shm.tag = env::getString(env::kRunId).value_or("job");
  shm.group.stores = shmStoresFromEnvironment();
  if (choice == Choice::SharedMemory) return makeShmCommunicator(store, rank, world, shm);
  GlooOptions gloo;
  gloo.interface = env::getString(env::kGlooSocketIfname).value_or("");
  gloo.peer_host = *env::getString(env::kMasterAddr);
  gloo.timeout = options.timeout;
  if (choice == Choice::Gloo) return makeGlooCommunicator(store, rank, world, gloo);
  HierarchicalLayout layout{rank, world, env::getInt(env::kLocalRank, -1), localWorld};
  return makeHierarchicalCommunicator(store, layout, shm, gloo);
}

}  // namespace accel::comm
