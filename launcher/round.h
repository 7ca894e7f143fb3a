// ddprun's round: runs this node's workers once, until all exit, one fails, a signal arrives or another node fails.
#pragma once

#include "launcher/assignment.h"
#include "launcher/elastic_rendezvous.h"
#include "launcher/options.h"
#include "launcher/store.h"

#include <map>
#include <string>

namespace ddp {

enum class RoundEnd {
  kSucceeded,     // every local worker exited 0
  kWorkerFailed,  // a local worker exited non-zero or died by a signal
  kPeerFailed,    // another node reported a failed worker in this round
  kPeerStopped,   // another node stopped the job (a signal, a flag mismatch)
  kStoreLost,     // node 0's ddprun can no longer be reached
  kNodesChanged,  // c10d: nodes wait to join and there is room: the workers checkpointed (SIGUSR1), the nodes meet
                  // again
};

// What supervising the round saw (torchelastic's RunResult); launcher/outcome.h says what it means for the job.
struct RoundResult {
  RoundEnd end = RoundEnd::kSucceeded;
  std::string reason;     // for every end but kSucceeded
  int signal = 0;         // a SIGINT/SIGTERM/SIGHUP/SIGUSR1 that ddprun received and forwarded (no restart then)
  bool requeued = false;  // a worker exited kRequeueExitCode: it checkpointed before a scheduler's time limit
  // The first worker that failed (neither 0 nor kRequeueExitCode) once the round was stopping, with how it ended;
  // empty when none did. Counts only after ddprun's SIGUSR1 (RoundOutcome).
  std::string failed_while_stopping;
};

// Starts the workers of round `a` (its ranks, a.restart_count as TORCHELASTIC_RESTART_COUNT) and supervises them;
// when one fails, ddprun received a stop signal, or the job store says the round failed, it stops all local workers
// (the signal, or SIGTERM, then SIGKILL after --grace-period) and returns only once no process of any worker's
// process group is left. With `rendezvous` (c10d) it also sends keep-alives, ends the round when a member misses
// them (a failure), and when nodes wait to join it sends the workers SIGUSR1 (checkpoint at the next step).
RoundResult run_round(const LaunchOptions& o, const RoundAssignment& a, const std::string& program_path,
                      const std::map<std::string, std::string>& base_env, JobStore* store,
                      ElasticRendezvous* rendezvous);

}  // namespace ddp
