// ddprun's flags from the environment when not on the command line: torchrun's PET_* variables, Slurm's under srun.
#pragma once

#include "launcher/flags.h"

#include <map>
#include <set>
#include <string>

namespace ddp {

// For each row of launch_flags() with a PET_ variable, not in `given` (the rows on the command line), whose variable
// is set and not empty: applies its value as torchrun's argparse does (a switch is on for a nonzero integer). Throws
// LaunchUsageError naming the variable for a value the row refuses.
void apply_pet_env(LaunchOptions& o, const std::set<const FlagRow*>& given,
                   const std::map<std::string, std::string>& env, const NodeCounts& node);

// Under srun (SLURM_STEP_NUM_NODES set: one ddprun per node, srun --ntasks-per-node=1), for --nnodes, --node-rank and
// --master-addr when neither the flag nor its PET_ variable is given: SLURM_STEP_NUM_NODES, SLURM_NODEID, and
// MASTER_ADDR or else the first host of the node list (distributed/slurm_master.h). A batch script's own shell (no
// step) keeps the flags' defaults. Throws LaunchUsageError naming a malformed variable.
void apply_slurm_defaults(LaunchOptions& o, const std::set<const FlagRow*>& given,
                          const std::map<std::string, std::string>& env, const NodeCounts& node);

}  // namespace ddp
