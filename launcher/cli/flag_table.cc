// The flag table of `accel launch` / `accel run` (launch_flags.h): accelerate's, torchrun's and
// accel's own flags, section by section, in help order.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/schema.h"
#include "launcher/base/text.h"
#include "launcher/cli/launch_flags.h"

namespace accel::launcher {
namespace {

using nlohmann::json;

// A row of the table, built fluently so each reads as one line of what the flag is.
class F {
 public:
  F(std::initializer_list<std::string_view> names, std::string_view dest) {
    s_.names = names;
    s_.dest = dest;
  }
  F& sw(std::string_view def = "false") { return arity(FlagArity::Switch, def); }
  F& swOff(std::string_view def) { return arity(FlagArity::SwitchFalse, def); }
  F& append() { return arity(FlagArity::Append, "null"); }
  F& str(std::string_view def = "null") { return value(FlagType::Str, def); }
  F& integer(std::string_view def = "null") { return value(FlagType::Int, def); }
  F& real(std::string_view def = "null") { return value(FlagType::Float, def); }
  F& strToBool(std::string_view def) { return value(FlagType::StrToBool, def); }
  F& pyBool(std::string_view def) { return value(FlagType::PyBool, def); }
  F& boolTuple(std::string_view def) { return value(FlagType::BoolTuple, def); }
  F& choices(std::initializer_list<std::string_view> c) {
    s_.choices = c;
    return *this;
  }
  F& torchrunToo() {
    s_.origin |= kFromTorchrun;
    return *this;
  }
  F& torchrunOnly() {
    s_.origin = kFromTorchrun;
    return *this;
  }
  F& accelOnly() {
    s_.origin = kFromAccel;
    return *this;
  }
  F& accelToo() {
    s_.origin |= kFromAccel;
    return *this;
  }
  F& env() {
    s_.use = FlagUse::WorkerEnv;
    return *this;
  }
  F& notice(std::string_view why) {
    s_.use = FlagUse::Notice;
    s_.why = why;
    return *this;
  }
  F& refuse(std::string_view why) {
    s_.use = FlagUse::Refuse;
    s_.why = why;
    return *this;
  }
  F& help(std::string_view h) {
    s_.help = h;
    return *this;
  }
  operator FlagSpec() const { return s_; }  // NOLINT: the table is a list of F rows

 private:
  F& arity(FlagArity a, std::string_view def) {
    s_.arity = a;
    s_.default_json = def;
    return *this;
  }
  F& value(FlagType t, std::string_view def) {
    s_.type = t;
    s_.default_json = def;
    return *this;
  }
  FlagSpec s_;
};

constexpr std::string_view kTpuOnly =
    "only TPU launches read it, and accel does not launch TPU jobs";
constexpr std::string_view kPdshOnly =
    "only DeepSpeed's own multi-node launcher (pdsh/ssh fan-out) reads it; accel runs one agent "
    "per machine";
constexpr std::string_view kSageMaker =
    "only SageMaker launches read it, and accel does not launch on SageMaker";

std::vector<FlagSpec> hardwareAndResources() {
  return {
      F({"--config_file"}, "config_file")
          .str()
          .help("Config file (default: accelerate's default_config.yaml)"),
      F({"--quiet", "-q"}, "quiet")
          .sw("null")
          .accelToo()
          .help("No agent notices; worker output and errors only"),
      F({"--cpu"}, "cpu").sw().help("Run on CPU only, even if GPUs are available"),
      F({"--multi_gpu"}, "multi_gpu").sw().help("Distributed GPU training"),
      F({"--tpu"}, "tpu")
          .sw()
          .refuse("TPU (XLA) jobs are launched by torch_xla; accel launches CPU and CUDA GPU jobs"),
      F({"--mixed_precision"}, "mixed_precision")
          .str()
          .choices({"no", "fp16", "bf16", "fp8"})
          .help("no, fp16, bf16 or fp8"),
      F({"--num_processes", "-n"}, "num_processes")
          .integer()
          .help("Total number of processes over all machines"),
      F({"--num_machines"}, "num_machines").integer().help("Number of machines"),
      F({"--num_cpu_threads_per_process"}, "num_cpu_threads_per_process")
          .integer()
          .help("OMP_NUM_THREADS of each process"),
      F({"--enable_cpu_affinity"}, "enable_cpu_affinity")
          .sw()
          .help("Pin each process to its share of the cores (NUMA-aware)"),
      F({"--dynamo_backend"}, "dynamo_backend")
          .str()
          .env()
          .choices({"no", "eager", "aot_eager", "inductor", "aot_ts_nvfuser", "nvprims_nvfuser",
                    "cudagraphs", "ofi", "fx2trt", "onnxrt", "tensorrt", "aot_torchxla_trace_once",
                    "torhchxla_trace_once", "tvm"})
          .help("torch.compile backend (ACCELERATE_DYNAMO_BACKEND)"),
      F({"--dynamo_mode"}, "dynamo_mode")
          .str("\"default\"")
          .choices({"default", "reduce-overhead", "max-autotune"})
          .env()
          .help("torch.compile mode"),
      F({"--dynamo_use_fullgraph"}, "dynamo_use_fullgraph")
          .sw()
          .env()
          .help("torch.compile fullgraph=True"),
      F({"--dynamo_use_dynamic"}, "dynamo_use_dynamic")
          .sw()
          .env()
          .help("torch.compile dynamic=True"),
      F({"--dynamo_use_regional_compilation"}, "dynamo_use_regional_compilation")
          .sw()
          .env()
          .help("Compile repeated blocks once"),
      F({"--use_deepspeed"}, "use_deepspeed")
          .sw()
          .help("DeepSpeed: launched like multi-GPU, with ACCELERATE_DEEPSPEED_* variables"),
      F({"--use_fsdp"}, "use_fsdp")
          .sw()
          .help("FSDP: launched like multi-GPU, with FSDP_* variables"),
      F({"--use_parallelism_config"}, "use_parallelism_config")
          .sw()
          .env()
          .help("PARALLELISM_CONFIG_* variables (FSDP 2)"),
      F({"--use_megatron_lm"}, "use_megatron_lm")
          .sw()
          .help("Megatron-LM: launched like multi-GPU, with MEGATRON_LM_* variables"),
      F({"--ipex"}, "ipex")
          .sw()
          .notice("Intel Extension for PyTorch was accelerate 0.x's CPU switch; workers use it on "
                  "their own"),
      F({"--use_xpu"}, "use_xpu")
          .sw()
          .notice("accel launches CPU and CUDA GPU jobs, not Intel XPU"),
  };
}

std::vector<FlagSpec> distributed() {
  return {
      F({"--gpu_ids"}, "gpu_ids")
          .str()
          .help("GPUs to use on this machine: all, or a list like 0,1 (CUDA_VISIBLE_DEVICES)"),
      F({"--same_network"}, "same_network").sw().help("All machines are on the same local network"),
      F({"--machine_rank"}, "machine_rank").integer().help("Rank of this machine"),
      F({"--main_process_ip"}, "main_process_ip")
          .str()
          .help("Address of machine 0, which hosts the job's store"),
      F({"--main_process_port"}, "main_process_port")
          .integer()
          .help("Port of the job's store on machine 0 (0: any free port)"),
      F({"--tee", "-t"}, "tee")
          .str("\"0\"")
          .torchrunToo()
          .help("Also copy worker streams to log files: 0 none, 1 stdout, 2 stderr, 3 both, or "
                "0:3,1:1 per local rank"),
      F({"--redirects", "-r"}, "redirects")
          .str("\"0\"")
          .torchrunOnly()
          .accelToo()
          .help("Send worker streams to log files instead of the console (values as --tee)"),
      F({"--log_dir"}, "log_dir")
          .str()
          .torchrunToo()
          .help("Keep every rank's streams in LOG_DIR/<run_id>_<random>/attempt_K/<local_rank>/"),
      F({"--role"}, "role").str("\"default\"").torchrunToo().help("ROLE_NAME of the workers"),
      F({"--rdzv_backend"}, "rdzv_backend")
          .str("\"static\"")
          .torchrunToo()
          .help("static, c10d, or etcd (etcd-v2: the same; the rounds live in the etcd cluster at "
                "--rdzv_endpoint, v3 API)"),
      F({"--rdzv_conf"}, "rdzv_conf")
          .str("\"\"")
          .torchrunToo()
          .help("k=v,...: timeout= (or join_timeout=) SECONDS bounds the rendezvous; is_host=1|0 "
                "says whether this machine hosts a c10d rendezvous; last_call_timeout=SECONDS, "
                "close_timeout=SECONDS, keep_alive_interval=SECONDS and keep_alive_max_attempt=N "
                "shape elastic membership; torch's other keys are accepted, unknown keys are "
                "errors"),
      F({"--max_restarts"}, "max_restarts")
          .integer("0")
          .torchrunToo()
          .help("Restart the job up to K times after a failure"),
      F({"--monitor_interval"}, "monitor_interval")
          .real("0.1")
          .torchrunToo()
          .help("Accepted; accel reacts to worker exits as they happen"),
      F({"--module", "-m"}, "module")
          .sw("null")
          .torchrunToo()
          .help("Run the script as a Python module (python -m)"),
      F({"--no_python"}, "no_python")
          .sw("null")
          .torchrunToo()
          .help("Run the script directly, not through python"),
      F({"--debug"}, "debug")
          .sw("null")
          .help("ACCELERATE_DEBUG_MODE: check distributed operations for errors"),
      F({"--mpirun_hostfile"}, "mpirun_hostfile")
          .str()
          .help("Run the job with mpirun --hostfile FILE (multi-CPU)"),
      F({"--mpirun_ccl"}, "mpirun_ccl")
          .str()
          .notice("oneCCL's worker count was an accelerate 0.x mpirun setting; accel does not set "
                  "up oneCCL"),
  };
}

std::vector<FlagSpec> torchrun() {
  return {
      F({"--nproc_per_node"}, "nproc_per_node")
          .str()
          .torchrunOnly()
          .help("Processes per machine: N, auto, gpu or cpu"),
      F({"--nnodes"}, "nnodes")
          .str()
          .torchrunOnly()
          .help("Machines: N, or MIN:MAX for an elastic group (c10d, etcd: starts "
                "last_call_timeout after MIN joined, at once with MAX; a lost machine is dropped "
                "while MIN remain; a later arrival re-forms the group)"),
      F({"--node_rank"}, "node_rank")
          .integer()
          .torchrunOnly()
          .help("Rank of this machine (torchrun's --machine_rank)"),
      F({"--master_addr"}, "master_addr")
          .str()
          .torchrunOnly()
          .help("Address of machine 0 (torchrun's --main_process_ip)"),
      F({"--master_port"}, "master_port")
          .integer()
          .torchrunOnly()
          .help("Port on machine 0 (torchrun's --main_process_port)"),
      F({"--rdzv_endpoint"}, "rdzv_endpoint")
          .str()
          .torchrunOnly()
          .help("HOST:PORT of the job's store"),
      F({"--rdzv_id"}, "rdzv_id")
          .str()
          .torchrunOnly()
          .help("Job id: TORCHELASTIC_RUN_ID and the log directory's name"),
      F({"--standalone"}, "standalone")
          .sw()
          .torchrunOnly()
          .help("One machine, store on a free port"),
      F({"--run_path"}, "run_path")
          .sw()
          .torchrunOnly()
          .help("Run the script with python even without a .py suffix"),
      F({"--local_ranks_filter"}, "local_ranks_filter")
          .str()
          .torchrunOnly()
          .accelToo()
          .help("Show only these local ranks on the console, e.g. 0 or 0,2"),
      F({"--local_addr"}, "local_addr")
          .str()
          .torchrunOnly()
          .help("This machine's address as the other machines reach it"),
      F({"--start_method"}, "start_method")
          .str("\"spawn\"")
          .choices({"spawn", "fork", "forkserver"})
          .torchrunOnly()
          .notice("accel always starts workers as fresh processes (fork+exec), which is what spawn "
                  "gives"),
      F({"--event_log_handler"}, "event_log_handler")
          .str("\"null\"")
          .torchrunOnly()
          .notice("torchelastic's event handlers are Python plugins; accel writes summary.json "
                  "instead"),
      F({"--logs_specs"}, "logs_specs")
          .str()
          .torchrunOnly()
          .notice("LogsSpecs are Python plugins; accel keeps torchrun's default log layout"),
      F({"--numa_binding"}, "numa_binding")
          .str()
          .choices({"node", "socket", "exclusive", "core-complex"})
          .torchrunOnly()
          .notice("use --enable_cpu_affinity, accel's NUMA-aware pinning"),
      F({"--signals_to_handle"}, "signals_to_handle")
          .str()
          .torchrunOnly()
          .notice("accel always forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the workers and "
                  "SIGUSR1/SIGUSR2 to each worker process"),
  };
}

// torchrun's flags new in torch 2.12 (run.py's, same meaning).
std::vector<FlagSpec> torchrun212() {
  return {
      F({"--duplicate_stdout_filters"}, "duplicate_stdout_filters")
          .str()
          .torchrunOnly()
          .help("Teed stdout lines containing any of these comma-separated strings (,, for a "
                "comma) are also written to attempt_K/filtered_stdout.log"),
      F({"--duplicate_stderr_filters"}, "duplicate_stderr_filters")
          .str()
          .torchrunOnly()
          .help("The same for stderr (attempt_K/filtered_stderr.log)"),
      F({"--virtual_local_rank"}, "virtual_local_rank")
          .sw()
          .torchrunOnly()
          .help("Every worker gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES its own GPU only"),
      F({"--shutdown_timeout"}, "shutdown_timeout")
          .integer()
          .torchrunOnly()
          .help("Seconds between SIGTERM and SIGKILL when stopping workers (torchrun's "
                "--term_timeout; default $TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 5; torchrun's: 30)"),
  };
}

std::vector<FlagSpec> tpuAndAws() {
  return {
      F({"--tpu_cluster"}, "tpu_use_cluster").sw().notice(kTpuOnly),
      F({"--no_tpu_cluster"}, "tpu_use_cluster").swOff("false").notice(kTpuOnly),
      F({"--tpu_use_sudo"}, "tpu_use_sudo").sw().notice(kTpuOnly),
      F({"--vm"}, "vm").append().notice(kTpuOnly),
      F({"--env"}, "env").append().notice(kTpuOnly),
      F({"--main_training_function"}, "main_training_function").str().notice(kTpuOnly),
      F({"--downcast_bf16"}, "downcast_bf16").sw().notice(kTpuOnly),
      F({"--aws_access_key_id"}, "aws_access_key_id").str().notice(kSageMaker),
      F({"--aws_secret_access_key"}, "aws_secret_access_key").str().notice(kSageMaker),
  };
}

std::vector<FlagSpec> deepspeed() {
  return {
      F({"--deepspeed_config_file"}, "deepspeed_config_file")
          .str()
          .env()
          .help("ACCELERATE_DEEPSPEED_CONFIG_FILE (DeepSpeed jobs)"),
      F({"--zero_stage"}, "zero_stage")
          .integer()
          .env()
          .help("ACCELERATE_DEEPSPEED_ZERO_STAGE (DeepSpeed jobs)"),
      F({"--offload_optimizer_device"}, "offload_optimizer_device")
          .str()
          .env()
          .help("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE (DeepSpeed jobs)"),
      F({"--offload_param_device"}, "offload_param_device")
          .str()
          .env()
          .help("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE (DeepSpeed jobs)"),
      F({"--offload_optimizer_nvme_path"}, "offload_optimizer_nvme_path")
          .str()
          .env()
          .help("Accepted; accelerate 1.x sets no variable for it either"),
      F({"--offload_param_nvme_path"}, "offload_param_nvme_path")
          .str()
          .env()
          .help("Accepted; accelerate 1.x sets no variable for it either"),
      F({"--gradient_accumulation_steps"}, "gradient_accumulation_steps")
          .integer()
          .env()
          .help("ACCELERATE_GRADIENT_ACCUMULATION_STEPS (every job; accelerate: DeepSpeed only)"),
      F({"--gradient_clipping"}, "gradient_clipping")
          .real()
          .env()
          .help("ACCELERATE_GRADIENT_CLIPPING (DeepSpeed jobs)"),
      F({"--zero3_init_flag"}, "zero3_init_flag")
          .str()
          .env()
          .help("ACCELERATE_DEEPSPEED_ZERO3_INIT (DeepSpeed jobs)"),
      F({"--zero3_save_16bit_model"}, "zero3_save_16bit_model")
          .str()
          .env()
          .help("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL (DeepSpeed jobs)"),
      F({"--deepspeed_hostfile"}, "deepspeed_hostfile").str().notice(kPdshOnly),
      F({"--deepspeed_exclusion_filter"}, "deepspeed_exclusion_filter").str().notice(kPdshOnly),
      F({"--deepspeed_inclusion_filter"}, "deepspeed_inclusion_filter").str().notice(kPdshOnly),
      F({"--deepspeed_multinode_launcher"}, "deepspeed_multinode_launcher")
          .str()
          .env()
          .help("standard: one agent per machine; others (pdsh, ssh fan-out) get a notice: out of "
                "scope"),
      F({"--deepspeed_moe_layer_cls_names"}, "deepspeed_moe_layer_cls_names")
          .str()
          .env()
          .help("ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES (DeepSpeed jobs)"),
  };
}

std::vector<FlagSpec> fsdp() {
  return {
      F({"--fsdp_version"}, "fsdp_version").str("\"1\"").choices({"1", "2"}).env(),
      F({"--fsdp_offload_params"}, "fsdp_offload_params").str("\"false\"").env(),
      F({"--fsdp_min_num_params"}, "fsdp_min_num_params").integer("100000000").env(),
      F({"--fsdp_sharding_strategy"}, "fsdp_sharding_strategy").str("\"FULL_SHARD\"").env(),
      F({"--fsdp_reshard_after_forward"}, "fsdp_reshard_after_forward").str("\"true\"").env(),
      F({"--fsdp_auto_wrap_policy"}, "fsdp_auto_wrap_policy").str().env(),
      F({"--fsdp_transformer_layer_cls_to_wrap"}, "fsdp_transformer_layer_cls_to_wrap").str().env(),
      F({"--fsdp_backward_prefetch"}, "fsdp_backward_prefetch").str().env(),
      F({"--fsdp_state_dict_type"}, "fsdp_state_dict_type").str().env(),
      F({"--fsdp_forward_prefetch"}, "fsdp_forward_prefetch").str("\"false\"").env(),
      F({"--fsdp_use_orig_params"}, "fsdp_use_orig_params").str("\"true\"").env(),
      F({"--fsdp_cpu_ram_efficient_loading"}, "fsdp_cpu_ram_efficient_loading")
          .str("\"true\"")
          .env(),
      F({"--fsdp_sync_module_states"}, "fsdp_sync_module_states").str("\"true\"").env(),
      F({"--fsdp_activation_checkpointing"}, "fsdp_activation_checkpointing")
          .str("\"false\"")
          .env(),
      F({"--fsdp_backward_prefetch_policy"}, "fsdp_backward_prefetch_policy")
          .str()
          .notice("deprecated by accelerate 0.27 and removed since; use --fsdp_backward_prefetch"),
  };
}

std::vector<FlagSpec> megatron() {
  std::vector<FlagSpec> rows = {
      F({"--megatron_lm_tp_degree"}, "megatron_lm_tp_degree").integer("1"),
      F({"--megatron_lm_use_custom_fsdp"}, "megatron_lm_use_custom_fsdp").pyBool("false"),
      F({"--megatron_lm_no_load_optim"}, "megatron_lm_no_load_optim").pyBool("false"),
      F({"--megatron_lm_eod_mask_loss"}, "megatron_lm_eod_mask_loss").pyBool("false"),
      F({"--megatron_lm_overlap_cpu_optimizer_d2h_h2d"},
        "megatron_lm_overlap_cpu_optimizer_d2h_h2d")
          .pyBool("false"),
      F({"--megatron_lm_no_save_optim"}, "megatron_lm_no_save_optim").pyBool("false"),
      F({"--megatron_lm_optimizer_cpu_offload"}, "megatron_lm_optimizer_cpu_offload")
          .pyBool("false"),
      F({"--megatron_lm_use_precision_aware_optimizer"},
        "megatron_lm_use_precision_aware_optimizer")
          .pyBool("false"),
      F({"--megatron_lm_decoder_last_pipeline_num_layers"},
        "megatron_lm_decoder_last_pipeline_num_layers")
          .integer(),
      F({"--megatron_lm_pp_degree"}, "megatron_lm_pp_degree").integer("1"),
      F({"--megatron_lm_num_micro_batches"}, "megatron_lm_num_micro_batches").integer(),
      F({"--megatron_lm_sequence_parallelism"}, "megatron_lm_sequence_parallelism").str(),
      F({"--megatron_lm_recompute_activations"}, "megatron_lm_recompute_activations").str(),
      F({"--megatron_lm_use_distributed_optimizer"}, "megatron_lm_use_distributed_optimizer").str(),
      F({"--megatron_lm_gradient_clipping"}, "megatron_lm_gradient_clipping").real("1.0"),
      F({"--megatron_lm_recompute_granularity"}, "megatron_lm_recompute_granularity").str(),
      F({"--megatron_lm_recompute_method"}, "megatron_lm_recompute_method").str(),
      F({"--megatron_lm_recompute_num_layers"}, "megatron_lm_recompute_num_layers").integer(),
      F({"--megatron_lm_attention_backend"}, "megatron_lm_attention_backend").str(),
      F({"--megatron_lm_expert_model_parallel_size"}, "megatron_lm_expert_model_parallel_size")
          .integer(),
      F({"--megatron_lm_context_parallel_size"}, "megatron_lm_context_parallel_size").integer(),
      F({"--megatron_lm_attention_dropout"}, "megatron_lm_attention_dropout").real(),
      F({"--megatron_lm_hidden_dropout"}, "megatron_lm_hidden_dropout").real(),
      F({"--megatron_lm_attention_softmax_in_fp32"}, "megatron_lm_attention_softmax_in_fp32").str(),
      F({"--megatron_lm_expert_tensor_parallel_size"}, "megatron_lm_expert_tensor_parallel_size")
          .integer(),
      F({"--megatron_lm_calculate_per_token_loss"}, "megatron_lm_calculate_per_token_loss").str(),
      F({"--megatron_lm_use_rotary_position_embeddings"},
        "megatron_lm_use_rotary_position_embeddings")
          .str(),
  };
  for (auto& row : rows) row.use = FlagUse::WorkerEnv;
  return rows;
}

std::vector<FlagSpec> fp8AndParallelism() {
  std::vector<FlagSpec> rows = {
      F({"--fp8_backend"}, "fp8_backend").str().choices({"ao", "te", "msamp"}),
      F({"--fp8_use_autocast_during_eval"}, "fp8_use_autocast_during_eval").sw(),
      F({"--fp8_margin"}, "fp8_margin").integer("0"),
      F({"--fp8_interval"}, "fp8_interval").integer("1"),
      F({"--fp8_format"}, "fp8_format").str("\"HYBRID\"").choices({"HYBRID", "E4M3", "E5M2"}),
      F({"--fp8_amax_history_len"}, "fp8_amax_history_len").integer("1024"),
      F({"--fp8_amax_compute_algo"}, "fp8_amax_compute_algo")
          .str("\"most_recent\"")
          .choices({"max", "most_recent"}),
      F({"--fp8_override_linear_precision"}, "fp8_override_linear_precision")
          .boolTuple("[false, false, false]"),
      F({"--fp8_opt_level"}, "fp8_opt_level").str("\"O2\"").choices({"O1", "O2"}),
      F({"--fp8_enable_fsdp_float8_all_gather"}, "fp8_enable_fsdp_float8_all_gather")
          .strToBool("\"true\""),
      F({"--fp8_pad_inner_dim"}, "fp8_pad_inner_dim").strToBool("\"true\""),
      F({"--parallelism_config_dp_replicate_size"}, "parallelism_config_dp_replicate_size")
          .integer("1"),
      F({"--parallelism_config_dp_shard_size"}, "parallelism_config_dp_shard_size").integer("1"),
      F({"--parallelism_config_tp_size"}, "parallelism_config_tp_size").integer("1"),
      F({"--parallelism_config_cp_size"}, "parallelism_config_cp_size").integer("1"),
      F({"--parallelism_config_cp_backend"}, "parallelism_config_cp_backend")
          .str("\"torch\"")
          .choices({"torch"}),
      F({"--parallelism_config_cp_comm_strategy"}, "parallelism_config_cp_comm_strategy")
          .str("\"allgather\""),
      F({"--parallelism_config_sp_size"}, "parallelism_config_sp_size").integer("1"),
      F({"--parallelism_config_sp_backend"}, "parallelism_config_sp_backend")
          .str("\"deepspeed\"")
          .choices({"deepspeed"}),
      F({"--parallelism_config_sp_seq_length"}, "parallelism_config_sp_seq_length").str(),
      F({"--parallelism_config_sp_seq_length_is_variable"},
        "parallelism_config_sp_seq_length_is_variable")
          .pyBool("true"),
      F({"--parallelism_config_sp_attn_implementation"},
        "parallelism_config_sp_attn_implementation")
          .str("\"sdpa\""),
  };
  for (auto& row : rows) row.use = FlagUse::WorkerEnv;
  return rows;
}

std::vector<FlagSpec> accelOwn() {
  return {
      F({"--python"}, "python")
          .str()
          .accelOnly()
          .help("Python interpreter for .py scripts and -m (default: the config's accel_python, "
                "$PYTHON_EXEC, else python3 or, where it has no torch, the first that has)"),
      F({"--console_streams"}, "console_streams")
          .integer()
          .accelOnly()
          .help("Worker streams shown on the console: 0 none, 1 stdout, 2 stderr, 3 both (default "
                "3)"),
      F({"--rdzv_timeout"}, "rdzv_timeout")
          .real()
          .accelOnly()
          .help("Seconds the machines of a multi-machine job wait for each other (default 900)"),
      F({"--no_spawn"}, "no_spawn")
          .sw()
          .accelOnly()
          .help("Under srun/mpirun: this task is one rank (from "
                "SLURM_PROCID/OMPI_COMM_WORLD_RANK); exec it, spawn nothing"),
      F({"--dry_run"}, "dry_run")
          .sw()
          .accelOnly()
          .help("Print each rank's command and environment; start nothing"),
      F({"--dry_run_json"}, "dry_run_json")
          .sw()
          .accelOnly()
          .help("The same as one JSON object on stdout"),
      F({"--dry_run_gpus"}, "dry_run_gpus")
          .integer()
          .accelOnly()
          .help("With a dry run: plan as if this machine had N usable GPUs"),
      F({"--retry_identical_failures"}, "retry_identical_failures")
          .sw()
          .accelOnly()
          .help("Restart even when two attempts in a row failed the same way before any rank "
                "completed a step (by default accel stops restarting then)"),
      F({"--term_timeout"}, "term_timeout")
          .real("5.0")
          .accelOnly()
          .help("Seconds between SIGTERM and SIGKILL when stopping workers (default 5)"),
      F({"--hang_timeout"}, "hang_timeout")
          .real()
          .accelOnly()
          .help("Seconds without progress after which the job is hung: stuck ranks named, stacks "
                "dumped, job stopped, exit 124 (default: off; config key hang_timeout)"),
      F({"--exit_timeout"}, "exit_timeout")
          .real()
          .accelOnly()
          .help(
              "Seconds the other ranks get to exit once one exited 0; then they are named, their "
              "stacks dumped and stopped (default: a notice after 60 s; config key exit_timeout)"),
      F({"--store_connection_input_limit"}, "store_connection_input_limit")
          .str()
          .accelOnly()
          .help("Most the job's store holds of one connection's unfinished request (default 128M)"),
      F({"--store_input_budget"}, "store_input_budget")
          .str()
          .accelOnly()
          .help("Most the job's store holds of unfinished requests over all connections (default "
                "1G)"),
  };
}

// Healthy machines only (README): the checks before every round and the straggler scores.
std::vector<FlagSpec> healthAndStragglers() {
  return {
      F({"--health_check"}, "health_check")
          .str()
          .accelOnly()
          .help("A command each machine runs before it joins a round (with other machines): exit "
                "0 is healthy; else its last line says why, and the machine stays out and checks "
                "again every --health_check_interval"),
      F({"--health_check_dirs"}, "health_check_dirs")
          .str()
          .accelOnly()
          .help("Comma-separated directories (the checkpoint directory) each machine checks for "
                "64 MiB free before it joins a round, beside --log_dir"),
      F({"--health_check_interval"}, "health_check_interval")
          .real("30")
          .accelOnly()
          .help("Seconds between the health checks of a machine that failed them (default 30)"),
      F({"--health_check_timeout"}, "health_check_timeout")
          .real("60")
          .accelOnly()
          .help("Seconds --health_check may run; longer is a failure (default 60)"),
      F({"--straggler_threshold"}, "straggler_threshold")
          .real("0.7")
          .accelOnly()
          .help("A rank whose straggler score (the job's median work per step over its own, 0-1) "
                "falls below this is named a straggler (default 0.7)"),
      F({"--straggler_window"}, "straggler_window")
          .integer("20")
          .accelOnly()
          .help("Steps over which each rank's work per step is scored (default 20)"),
      F({"--straggler_action"}, "straggler_action")
          .choices({"warn", "exclude"})
          .accelOnly()
          .help("warn: name stragglers (default); exclude: also drop a straggler's machine at once "
                "when --nnodes MIN allows, without counting a restart"),
  };
}

std::vector<FlagSpec> buildTable() {
  std::vector<FlagSpec> all;
  for (auto part :
       {hardwareAndResources(), distributed(), torchrun(), torchrun212(), accelOwn(),
        healthAndStragglers(), deepspeed(), fsdp(), megatron(), fp8AndParallelism(), tpuAndAws()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace

const std::vector<FlagSpec>& launchFlags() {
  static const std::vector<FlagSpec> table = buildTable();
  return table;
}

bool allowedIn(const FlagSpec& f, LaunchMode mode) {
  return mode == LaunchMode::Accelerate || (f.origin & (kFromTorchrun | kFromAccel)) != 0;
}

const FlagSpec* findFlagSpec(std::string_view dest) {
  for (const auto& f : launchFlags()) {
    if (f.dest == dest) return &f;
  }
  return nullptr;
}

}  // namespace accel::launcher
