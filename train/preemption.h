// Preemption: SIGTERM/SIGINT, and SIGUSR1 (a scheduler's time limit ahead), set a flag the trainer checks at step
// boundaries; a second SIGTERM/SIGINT exits at once.
#pragma once

namespace ddp {

enum class StopRequest : int {
  kNone = 0,
  kStop = 1,     // SIGTERM/SIGINT: checkpoint and exit 0
  kRequeue = 2,  // SIGUSR1: checkpoint and exit kRequeueExitCode (base/exit_codes.h); outranks kStop
};

void install_preemption_handlers();
// What the signals received so far ask for.
StopRequest stop_request();

}  // namespace ddp
