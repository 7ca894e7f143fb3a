// ddprun's command line: torchrun's flags (dashes or underscores, --flag=value or --flag value) into LaunchOptions.
#pragma once

#include "launcher/flag_values.h"
#include "launcher/options.h"

#include <map>
#include <string>
#include <vector>

namespace ddp {

// This machine's GPUs and CPUs, for --nproc-per-node's words.
NodeCounts this_node();

// Parses ddprun's argv[1..] by the rows of launch_flags(); the first argument that is not a flag (or everything after
// "--") is PROGRAM ARGS. Flags not given come from `env` (ddprun's environment) where launcher/flag_env.h says, else
// take their defaults. Throws LaunchUsageError for an unknown flag, a bad value (a variable's: naming it) or flags
// that do not fit together.
LaunchOptions parse_launch_args(const std::vector<std::string>& args, const NodeCounts& node = this_node(),
                                const std::map<std::string, std::string>& env = {});

}  // namespace ddp
