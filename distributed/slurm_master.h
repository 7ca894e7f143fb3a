// Rank 0's address and store port as Slurm's variables imply them: the node list's first host, a port from the job id.
#pragma once

#include <map>
#include <string>

namespace ddp {

// The node list Slurm set for this process: SLURM_STEP_NODELIST (srun's step), else SLURM_JOB_NODELIST, else
// SLURM_NODELIST; its first host as `scontrol show hostnames` names it. `variable` is "" (and `host` "") when none
// is set. Throws std::runtime_error naming the variable for a list expand_hostlist refuses.
struct SlurmFirstHost {
  std::string variable, host;
};
SlurmFirstHost slurm_first_host(const std::map<std::string, std::string>& env);

// PyTorch Lightning's store port for a Slurm job (lightning/fabric/plugins/environments/slurm.py,
// SLURMEnvironment.main_port): the last 4 digits of SLURM_JOB_ID + 15000, so every task of the job derives the same
// port; 12910 without a job id. Throws std::runtime_error naming SLURM_JOB_ID when it is not a number.
int slurm_job_port(const std::map<std::string, std::string>& env);

}  // namespace ddp
