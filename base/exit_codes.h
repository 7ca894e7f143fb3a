// Exit codes ddptrain and ddprun share beyond 0 (done), 1 (failed) and 2 (config or usage error).
#pragma once

namespace ddp {

// Stopped before a scheduler's time limit (SIGUSR1, e.g. Slurm's --signal=USR1@90) with a checkpoint written: run the
// same command again (scontrol requeue) to resume. 75 is EX_TEMPFAIL of sysexits.h, "try again later".
constexpr int kRequeueExitCode = 75;

}  // namespace ddp
