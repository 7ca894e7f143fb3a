// RoundOutcome: what a round's end means for the job (torchelastic's WorkerState), the agent's next step, the exit.
#pragma once

#include "launcher/elastic_rendezvous.h"
#include "launcher/round.h"
#include "launcher/store.h"

#include <cstdint>
#include <string>

namespace ddp {

struct RoundOutcome {
  enum class Kind {
    kSucceeded,            // every node's workers exited 0 (torchelastic: SUCCEEDED): exit 0
    kFailed,               // a worker of some node failed, or a c10d member was lost (FAILED): restart or exit 1
    kMembershipChanged,    // c10d: the round made room for waiting nodes (HEALTHY with nodes waiting): meet again
    kRequeued,             // the workers checkpointed before a scheduler's time limit: exit kRequeueExitCode
    kStopped,              // ddprun received a signal and forwarded it: exit 128 + signal
    kSucceededAfterStop,   // ddprun received SIGUSR1 but the workers had finished: exit 0, without the exit barrier
    kFailedWhileStopping,  // ddprun received SIGUSR1 and a worker failed instead of checkpointing: exit 1
    kJobStopped,           // another node stopped the job (a signal, a flag mismatch): exit 1
    kJobFinished,          // c10d: the job finished before this node could join it: exit 0
    kLost,                 // node 0's ddprun or the rendezvous can no longer be reached: exit 1
  };
  Kind kind = Kind::kSucceeded;
  std::string reason;  // what happened (kStopped: "" or when), for every kind but kSucceeded and kSucceededAfterStop
  int signal = 0;      // kStopped: the signal
};

// The one place a supervised round's result becomes an outcome. With c10d, a round that ended for waiting nodes (or
// whose workers checkpointed for them) is a membership change once node rank 0 decided so (`rendezvous`). When this
// node's workers all succeeded and there is a job `store`, it waits for every node's (torchrun's exit barrier), or
// for a failure or stop that another node reports meanwhile, or a signal to ddprun.
RoundOutcome settle_round(const RoundResult& r, int64_t round, JobStore* store, ElasticRendezvous* rendezvous);

// ddprun received `sig` before the workers started (torchrun: the agent's SignalException).
RoundOutcome stopped_before_workers(int sig);

// What the agent does next (torchelastic's _invoke_run): a membership change meets again without counting; a failure
// restarts while `restarts` < `max_restarts`; everything else ends the job.
enum class NextStep { kMeetAgain, kRestart, kEnd };
NextStep next_step(const RoundOutcome& outcome, int64_t restarts, int64_t max_restarts);

// Says how the job ended (an "error: " line when it failed) and returns ddprun's exit code.
int end_job(const RoundOutcome& outcome, int64_t max_restarts);

}  // namespace ddp
