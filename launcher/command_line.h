// ddprun's command line: torchrun's flags (dashes or underscores, --flag=value or --flag value) into LaunchOptions.
#pragma once

#include "launcher/flag_values.h"
#include "launcher/options.h"

#include <string>
#include <vector>

namespace ddp {

// This machine's GPUs and CPUs, for --nproc-per-node's words.
NodeCounts this_node();

// Parses ddprun's argv[1..] by the rows of launch_flags(); the first argument that is not a flag (or everything after
// "--") is PROGRAM ARGS. Throws LaunchUsageError for an unknown flag, a bad value or flags that do not fit together.
LaunchOptions parse_launch_args(const std::vector<std::string>& args, const NodeCounts& node = this_node());

}  // namespace ddp
