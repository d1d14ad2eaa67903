#include "launcher/launch_flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/schema.h"
#include "launcher/text.h"

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
      F({"--rdzv_backend"}, "rdzv_backend").str("\"static\"").torchrunToo().help("static or c10d"),
      F({"--rdzv_conf"}, "rdzv_conf")
          .str("\"\"")
          .torchrunToo()
          .help("k=v,...: timeout= (or join_timeout=) SECONDS bounds the rendezvous; is_host=1|0 "
                "says whether this "
                "machine hosts a c10d rendezvous"),
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
          .help("Machines: N (MIN:MAX is accepted and runs on MIN, statically)"),
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
          .help("Python interpreter for .py scripts (default: $PYTHON_EXEC or python3)"),
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

std::vector<FlagSpec> buildTable() {
  std::vector<FlagSpec> all;
  for (auto part : {hardwareAndResources(), distributed(), torchrun(), accelOwn(), deepspeed(),
                    fsdp(), megatron(), fp8AndParallelism(), tpuAndAws()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace

namespace {

bool allowedIn(const FlagSpec& f, LaunchMode mode) {
  return mode == LaunchMode::Accelerate || (f.origin & (kFromTorchrun | kFromAccel)) != 0;
}

// Every way to write the flag: its names, and "--a-b" for each long "--a_b" (argparse in both
// accelerate and torchrun accepts either).
std::vector<std::string> spellingsOf(const FlagSpec& f) {
  std::vector<std::string> out;
  for (auto name : f.names) {
    out.emplace_back(name);
    if (name.size() > 2 && name.substr(0, 2) == "--" && name.find('_') != std::string_view::npos) {
      std::string dashed(name);
      std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
      out.push_back(dashed);
    }
  }
  return out;
}

struct Match {
  const FlagSpec* spec = nullptr;
};

// The flag `word` names: an exact spelling, else the one long flag it is a prefix of (argparse's
// abbreviations). Ambiguous and unknown words are errors naming the candidates.
Expected<Match> findFlag(const std::string& word, LaunchMode mode) {
  const FlagSpec* prefixOf = nullptr;
  std::set<std::string> candidates;
  for (const auto& f : launchFlags()) {
    if (!allowedIn(f, mode)) continue;
    for (const auto& s : spellingsOf(f)) {
      if (s == word) return Match{&f};
      if (word.size() > 2 && word.rfind("--", 0) == 0 && s.rfind(word, 0) == 0) {
        if (prefixOf != nullptr && prefixOf->dest != f.dest)
          candidates.insert(std::string(prefixOf->names.front()));
        if (prefixOf == nullptr || prefixOf->dest != f.dest)
          candidates.insert(std::string(f.names.front()));
        prefixOf = &f;
      }
    }
  }
  if (candidates.size() == 1) return Match{prefixOf};
  if (candidates.size() > 1) {
    std::string list;
    for (const auto& c : candidates) list += (list.empty() ? "" : ", ") + c;
    return makeError(word + ": ambiguous, it could be " + list);
  }
  if (mode == LaunchMode::Torchrun) {
    for (const auto& f : launchFlags()) {
      for (const auto& s : spellingsOf(f)) {
        if (s == word)
          return makeError("unknown flag " + word +
                           ": torchrun has no such flag (accel launch takes it)");
      }
    }
  }
  std::string closest;
  size_t best = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& f : launchFlags()) {
    if (!allowedIn(f, mode)) continue;
    for (const auto& s : spellingsOf(f)) {
      const size_t d = config::editDistance(word, s);
      if (d < best) best = d, closest = std::string(f.names.front());
    }
  }
  if (!closest.empty())
    return makeError("unknown flag " + word + " (did you mean " + closest + "?)");
  return makeError("unknown flag " + word + " (flags go before the training script; see --help)");
}

// Python's int(): surrounding whitespace, a sign, digits with single underscores between them.
std::optional<long long> pythonInt(std::string text) {
  text.erase(0, text.find_first_not_of(" \t\n"));
  text.erase(text.find_last_not_of(" \t\n") + 1);
  std::string digits;
  size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  for (size_t j = i; j < text.size(); ++j) {
    const char c = text[j];
    if (c == '_' && j > i && j + 1 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[j - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[j + 1]))) {
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    digits += c;
  }
  if (digits.empty()) return std::nullopt;
  long long value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return text[0] == '-' ? -value : value;
}

// Python's float(): decimal and exponent forms, inf/infinity/nan in any case; no hex.
std::optional<double> pythonFloat(std::string text) {
  text.erase(0, text.find_first_not_of(" \t\n"));
  text.erase(text.find_last_not_of(" \t\n") + 1);
  if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  std::string clean;
  for (size_t j = 0; j < text.size(); ++j) {
    if (text[j] == '_' && j > 0 && j + 1 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[j - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[j + 1]))) {
      continue;
    }
    clean += text[j];
  }
  char* end = nullptr;
  const double value = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return value;
}

std::optional<int> strToBool(std::string text) {
  text = lowerCase(std::move(text));
  for (const char* t : {"y", "yes", "t", "true", "on", "1"}) {
    if (text == t) return 1;
  }
  for (const char* f : {"n", "no", "f", "false", "off", "0"}) {
    if (text == f) return 0;
  }
  return std::nullopt;
}

// The text of a value converted as the flag's Python parser converts it.
Expected<json> convert(const FlagSpec& f, const std::string& name, const std::string& text) {
  auto bad = [&](const char* what) { return makeError(name + ": '" + text + "' is not " + what); };
  json value;
  switch (f.type) {
    case FlagType::Str:
      value = text;
      break;
    case FlagType::Int: {
      auto v = pythonInt(text);
      if (!v) return bad("an integer");
      value = *v;
      break;
    }
    case FlagType::Float: {
      auto v = pythonFloat(text);
      if (!v) return bad("a number");
      value = *v;
      break;
    }
    case FlagType::StrToBool: {
      auto v = strToBool(text);
      if (!v) return bad("a truth value (yes/no, true/false, on/off, 1/0)");
      value = *v;
      break;
    }
    case FlagType::PyBool:
      value = !text.empty();
      break;
    case FlagType::BoolTuple: {
      value = json::array();
      for (std::string_view item : splitOn(text, ',')) {
        auto v = strToBool(std::string(item));
        if (!v) return bad("a comma-separated list of truth values");
        value.push_back(*v);
      }
      break;
    }
  }
  if (!f.choices.empty()) {
    const std::string shown = value.is_string() ? value.get<std::string>() : value.dump();
    if (std::find(f.choices.begin(), f.choices.end(), shown) == f.choices.end()) {
      std::string list;
      for (auto c : f.choices) list += (list.empty() ? "" : ", ") + std::string(c);
      return makeError(name + ": '" + text + "' is not one of " + list);
    }
  }
  return value;
}

// The namespace before any flag: each dest's default, string defaults converted by the type
// (argparse's rule); torchrun's flags take PET_<DEST> from the environment in Torchrun mode.
ParsedLaunchFlags defaultsOf(LaunchMode mode, const probes::Environment& env) {
  ParsedLaunchFlags parsed;
  parsed.mode = mode;
  for (const auto& f : launchFlags()) {
    if (parsed.values.count(std::string(f.dest))) continue;  // the first of a shared dest sets it
    json def = json::parse(f.default_json);
    if (def.is_string() && f.type != FlagType::Str) {
      auto converted = convert(f, std::string(f.names.front()), def.get<std::string>());
      if (converted) def = *converted;
    }
    parsed.values[std::string(f.dest)] = def;
  }
  if (mode != LaunchMode::Torchrun) return parsed;
  for (const auto& f : launchFlags()) {
    if (!(f.origin & kFromTorchrun)) continue;
    std::string dest(f.dest);
    const std::string upper = upperCase(dest);
    auto fromEnv = probes::lookup(env, "PET_" + upper);
    if (!fromEnv) continue;
    if (f.arity == FlagArity::Switch) {
      parsed.values[dest] = *fromEnv != "0" && !fromEnv->empty();
    } else if (auto v = convert(f, "PET_" + upper, *fromEnv)) {
      parsed.values[dest] = *v;
    }
    parsed.given.insert(dest);
    parsed.spelling[dest] = "PET_" + upper;
  }
  return parsed;
}

bool looksLikeNegativeNumber(const std::string& s) {
  return s.size() > 1 && s[0] == '-' &&
         (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
}

}  // namespace

std::string ParsedLaunchFlags::nameOf(const std::string& dest) const {
  auto it = spelling.find(dest);
  if (it != spelling.end()) return it->second;
  const FlagSpec* spec = findFlagSpec(dest);
  return spec ? std::string(spec->names.front()) : "--" + dest;
}

const std::vector<FlagSpec>& launchFlags() {
  static const std::vector<FlagSpec> table = buildTable();
  return table;
}

const FlagSpec* findFlagSpec(std::string_view dest) {
  for (const auto& f : launchFlags()) {
    if (f.dest == dest) return &f;
  }
  return nullptr;
}

ParsedLaunchFlags defaultLaunchFlags(LaunchMode mode, const probes::Environment& env) {
  return defaultsOf(mode, env);
}

Expected<ParsedLaunchFlags> parseLaunchFlags(const std::vector<std::string>& args, LaunchMode mode,
                                             const probes::Environment& env) {
  ParsedLaunchFlags parsed = defaultsOf(mode, env);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      parsed.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (word.size() < 2 || word[0] != '-' || looksLikeNegativeNumber(word)) {
      parsed.command.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    }
    if (word == "-h" || word == "--help") {
      parsed.help = true;
      continue;
    }
    std::string name = word;
    std::optional<std::string> inlineValue;
    if (word.rfind("--", 0) == 0) {
      if (auto eq = word.find('='); eq != std::string::npos) {
        name = word.substr(0, eq);
        inlineValue = word.substr(eq + 1);
      }
    } else if (word.size() > 2) {  // -t3, -n=4
      name = word.substr(0, 2);
      inlineValue = word.substr(word[2] == '=' ? 3 : 2);
    }
    auto match = findFlag(name, mode);
    if (!match) return std::move(match).takeError();
    const FlagSpec& f = *match->spec;
    const std::string dest(f.dest);
    if (f.arity == FlagArity::Switch || f.arity == FlagArity::SwitchFalse) {
      if (inlineValue) return makeError(name + ": takes no value (got '" + *inlineValue + "')");
      parsed.values[dest] = f.arity == FlagArity::Switch;
    } else {
      if (!inlineValue) {
        if (i + 1 >= args.size() || (args[i + 1].rfind("-", 0) == 0 && args[i + 1].size() > 1 &&
                                     !looksLikeNegativeNumber(args[i + 1]))) {
          return makeError(name + ": expected a value");
        }
        inlineValue = args[++i];
      }
      auto value = convert(f, name, *inlineValue);
      if (!value) return std::move(value).takeError();
      if (f.arity == FlagArity::Append) {
        if (!parsed.values[dest].is_array()) parsed.values[dest] = json::array();
        parsed.values[dest].push_back(*value);
      } else {
        parsed.values[dest] = *value;
      }
    }
    parsed.given.insert(dest);
    parsed.spelling[dest] = name;
  }
  return parsed;
}

namespace {

// What a flag does, in one line: its help, or for the paradigm sections the variable it sets.
std::string whatItDoes(const FlagSpec& f) {
  if (f.use == FlagUse::Notice) return "accepted, ignored with a notice: " + std::string(f.why);
  if (f.use == FlagUse::Refuse) return "refused: " + std::string(f.why);
  if (!f.help.empty()) return std::string(f.help);
  const std::string dest(f.dest);
  const std::pair<const char*, const char*> sections[] = {
      {"fsdp_", "FSDP_%s (FSDP jobs)"},
      {"megatron_lm_", "MEGATRON_LM_%s (Megatron-LM jobs)"},
      {"fp8_", "ACCELERATE_FP8_%s (mixed_precision fp8)"},
      {"parallelism_config_", "PARALLELISM_CONFIG_%s (with --use_parallelism_config)"}};
  for (const auto& [prefix, pattern] : sections) {
    if (dest.rfind(prefix, 0) != 0) continue;
    std::string name = upperCase(dest.substr(std::string(prefix).size()));
    if (dest == "fsdp_transformer_layer_cls_to_wrap") name = "TRANSFORMER_CLS_TO_WRAP";
    if (dest == "fp8_override_linear_precision") name = "OVERRIDE_{FPROP,DGRAD,WGRAD}";
    std::string text(pattern);
    return text.replace(text.find("%s"), 2, name);
  }
  return "worker environment, as accelerate sets it";
}

}  // namespace

std::string launchFlagsMarkdown() {
  std::string out = "| Flag | From | What accel does |\n|---|---|---|\n";
  for (const auto& f : launchFlags()) {
    std::string names;
    for (auto n : f.names) names += (names.empty() ? "`" : ", `") + std::string(n) + "`";
    std::string from;
    for (auto [bit, name] : {std::pair{kFromAccelerate, "accelerate"},
                             {kFromTorchrun, "torchrun"},
                             {kFromAccel, "accel"}}) {
      if (f.origin & bit) from += (from.empty() ? "" : ", ") + std::string(name);
    }
    std::string what;
    for (char c : whatItDoes(f))
      what += c == '|' ? std::string("\\|") : std::string(1, c);  // a table cell
    out += "| " + names + " | " + from + " | " + what + " |\n";
  }
  return out;
}

std::string launchHelp(LaunchMode mode) {
  std::string out = mode == LaunchMode::Torchrun
                        ? "usage: accel run [flags] SCRIPT.py|BINARY [args...]   (torchrun's flags "
                          "and defaults)\n\n"
                        : "usage: accel launch [flags] SCRIPT.py|BINARY [args...]   (accelerate's "
                          "and torchrun's flags)\n\n";
  for (const auto& f : launchFlags()) {
    if (!allowedIn(f, mode)) continue;
    std::string names;
    for (auto n : f.names) names += (names.empty() ? "" : ", ") + std::string(n);
    if (f.arity == FlagArity::Value || f.arity == FlagArity::Append) names += " VALUE";
    out += "  " + names + "\n      " + whatItDoes(f) + "\n";
  }
  out +=
      "\nEvery long flag may be written with dashes or underscores, and abbreviated to a unique "
      "prefix.\n";
  return out;
}

namespace {

// Python's repr of a float: the shortest digits that read back, positional notation for
// exponents -4..15 (always with a ".0"), else d.ddde+XX.
std::string pythonFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, end);  // "-1.2345e+17"
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
            digits.substr(static_cast<size_t>(exponent) + 1);
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return negative ? "-" + out : out;
}

std::string pythonRepr(const json& value) {
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    const char quote =
        s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, quote);
    for (char c : s) {
      if (c == '\\' || c == quote) out += '\\';
      out += c;
    }
    return out + quote;
  }
  return pythonStr(value);
}

}  // namespace

std::string pythonStr(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "None";
    case json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return value.dump();
    case json::value_t::number_float:
      return pythonFloatRepr(value.get<double>());
    case json::value_t::string:
      return value.get<std::string>();
    case json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + pythonRepr(value[i]);
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.items()) {
        out += (first ? "" : ", ") + pythonRepr(json(k)) + ": " + pythonRepr(v);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

}  // namespace accel::launcher
