#include "apps/accel/config_flags.h"

namespace accel::apps {

void addConfigOverrideFlags(CLI::App& cmd, config::ConfigOverrides& o) {
  cmd.add_option("--config_file,--config-file", o.config_file,
                 "Config file to use instead of the default");
  cmd.add_flag("--cpu", o.cpu, "Run on CPU only");
  cmd.add_flag("--multi_gpu,--multi-gpu", o.multi_gpu, "Distributed GPU training");
  cmd.add_option("-n,--num_processes,--num-processes", o.num_processes,
                 "Total number of processes over all machines");
  cmd.add_option("--num_machines,--num-machines", o.num_machines, "Number of machines");
  cmd.add_option("--machine_rank,--machine-rank", o.machine_rank, "Rank of this machine");
  cmd.add_option("--main_process_ip,--main-process-ip", o.main_process_ip, "Address of machine 0");
  cmd.add_option("--main_process_port,--main-process-port", o.main_process_port,
                 "Port of the job's store on machine 0");
  cmd.add_option("--mixed_precision,--mixed-precision", o.mixed_precision, "no, fp16 or bf16");
  cmd.add_option("--gpu_ids,--gpu-ids", o.gpu_ids, "GPUs to use: all, or a list like 0,1");
  cmd.add_option("--rdzv_backend,--rdzv-backend", o.rdzv_backend,
                 "Rendezvous backend: static or c10d");
  cmd.add_flag_function(
      "--same_network,--same-network", [&o](std::int64_t) { o.same_network = true; },
      "All machines are on the same local network");
  cmd.add_flag("--debug", o.debug, "Check distributed operations for errors");
  cmd.add_flag("--enable_cpu_affinity,--enable-cpu-affinity", o.enable_cpu_affinity,
               "Pin each local rank to its share of this machine's CPUs, NUMA node by node");
}

}  // namespace accel::apps
