#pragma once
// The environment contract between `accel launch` and its workers, defined once and included
// by both sides: torchrun's variables plus accelerate's. Values are documented where they are
// produced (launcher/plan/worker_env.h) and consumed (libaccel).

namespace accel::env {

// torchrun's contract.
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr const char* kRoleRank = "ROLE_RANK";
inline constexpr const char* kRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr const char* kRoleName = "ROLE_NAME";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
// Gloo's interface for its sockets (the agent sets it when it knows which reaches the others).
inline constexpr const char* kGlooSocketIfname = "GLOO_SOCKET_IFNAME";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr const char* kRunId = "TORCHELASTIC_RUN_ID";
inline constexpr const char* kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr const char* kErrorFile = "TORCHELASTIC_ERROR_FILE";
inline constexpr const char* kTorchNcclAsyncErrorHandling = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
inline constexpr const char* kNcclAsyncErrorHandling =
    "NCCL_ASYNC_ERROR_HANDLING";  // torch 1.13's name
inline constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
inline constexpr const char* kPythonFaultHandler = "PYTHONFAULTHANDLER";

// accel's own: which TCPStore protocol generation libaccel's store client speaks ("legacy":
// torch 1.13–2.0, "validated": torch 2.1+, "auto" or unset: probe the server once).
inline constexpr const char* kStoreProtocol = "ACCEL_STORE_PROTOCOL";
// How libaccel's CPU ranks communicate: "auto" (or unset: shared memory when every rank is on
// one machine, else Gloo), "shm", "gloo".
inline constexpr const char* kCpuBackend = "ACCEL_CPU_BACKEND";
// How the shared-memory all-reduce writes what another rank reads: "auto" (or unset: timed when
// the group forms), "plain", "streaming" (shm_group.h's Stores).
inline constexpr const char* kShmStores = "ACCEL_SHM_STORES";
// Gradient compression for libaccel's all-reduce: "bf16" (DDP's bf16_compress_hook), "none".
inline constexpr const char* kGradientCompression = "ACCEL_GRADIENT_COMPRESSION";
// "0": libaccel copies gradients into its all-reduce buckets instead of making each .grad a view
// of its bucket (DDP's gradient_as_bucket_view; on by default).
inline constexpr const char* kGradientAsBucketView = "ACCEL_GRADIENT_AS_BUCKET_VIEW";

// The store key a worker ADDs 1 to at each step it begins ("accel_step/<RANK>"): the agent's
// progress heartbeat (libaccel/store/heartbeat.h). Set by the agent for every worker.
inline constexpr const char* kHeartbeatKey = "ACCEL_HEARTBEAT_KEY";
// The store key a worker ADDs its own work per step to, in microseconds ("accel_work_us/<RANK>"):
// the time not spent waiting for the other ranks, for the agent's straggler scores. Set by the
// agent beside ACCEL_HEARTBEAT_KEY.
inline constexpr const char* kWorkKey = "ACCEL_WORK_KEY";

// accelerate's contract.
inline constexpr const char* kMixedPrecision = "ACCELERATE_MIXED_PRECISION";
inline constexpr const char* kUseCpu = "ACCELERATE_USE_CPU";
inline constexpr const char* kDebugMode = "ACCELERATE_DEBUG_MODE";
inline constexpr const char* kGradientAccumulationSteps = "ACCELERATE_GRADIENT_ACCUMULATION_STEPS";
inline constexpr const char* kCpuAffinity = "ACCELERATE_CPU_AFFINITY";
inline constexpr const char* kDynamoBackend = "ACCELERATE_DYNAMO_BACKEND";
inline constexpr const char* kDynamoMode = "ACCELERATE_DYNAMO_MODE";
inline constexpr const char* kDynamoUseFullgraph = "ACCELERATE_DYNAMO_USE_FULLGRAPH";
inline constexpr const char* kDynamoUseDynamic = "ACCELERATE_DYNAMO_USE_DYNAMIC";
inline constexpr const char* kDynamoUseRegionalCompilation =
    "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION";
inline constexpr const char* kKmpAffinity = "KMP_AFFINITY";
inline constexpr const char* kKmpBlocktime = "KMP_BLOCKTIME";

}  // namespace accel::env
