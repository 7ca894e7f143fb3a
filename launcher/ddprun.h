// launch_job: runs one ddprun job: its secret, the workers' environment, the job store and rendezvous, the agent loop.
#pragma once

#include "launcher/options.h"

#include <string>

namespace ddp {

// Runs PROGRAM (`program_path`, resolved) as `o` asks and returns ddprun's exit code. Throws LaunchUsageError for a
// bad DDPTRAIN_JOB_SECRET or flags that differ from the job's other nodes, std::runtime_error when the job store
// cannot be served or reached.
int launch_job(const LaunchOptions& o, const std::string& program_path);

}  // namespace ddp
