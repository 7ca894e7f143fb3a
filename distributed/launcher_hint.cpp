// Launcher-aware hints for a missing MASTER_ADDR/MASTER_PORT: Slurm (no node list), Open MPI, torchrun/ddprun, by hand.
#include "distributed/launcher_hint.h"

namespace ddp {
namespace {

// torchrun and ddprun set TORCHELASTIC_RESTART_COUNT (and MASTER_ADDR/MASTER_PORT) for every worker they start.
bool started_by_elastic_agent(const std::map<std::string, std::string>& env) {
  return env.count("TORCHELASTIC_RESTART_COUNT") || env.count("TORCHELASTIC_RUN_ID");
}

}  // namespace

std::string launcher_name(const std::string& source, const std::map<std::string, std::string>& env) {
  if (source == "slurm") return "Slurm (srun)";
  if (source == "openmpi") return "Open MPI (mpirun)";
  return started_by_elastic_agent(env) ? "torchrun/ddprun" : "RANK/WORLD_SIZE set by hand";
}

std::string master_address_hint(const std::string& source, const std::map<std::string, std::string>& env) {
  if (source == "slurm")
    return "ddptrain takes the first host of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or SLURM_NODELIST, and none is "
           "set: export MASTER_ADDR=<host of rank 0> before srun (srun passes the environment on to every task; "
           "MASTER_PORT defaults from SLURM_JOB_ID)";
  if (source == "openmpi")
    return "pass them to every rank: mpirun -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=29500 ...";
  if (started_by_elastic_agent(env))
    return "torchrun and ddprun set both for every worker: start it through them with the environment unchanged "
           "(ddprun --master_addr=HOST --master_port=PORT, or --standalone on one machine)";
  return "set MASTER_ADDR=<host of rank 0> MASTER_PORT=29500 for every rank, or start the workers with "
         "ddprun --master_addr=HOST --master_port=29500 (one machine: ddprun --standalone)";
}

}  // namespace ddp
