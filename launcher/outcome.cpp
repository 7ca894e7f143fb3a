// RoundOutcome: the round's result classified once, the exit barrier, the restart budget and ddprun's exit code.
#include "launcher/outcome.h"

#include "base/exit_codes.h"
#include "base/first_line.h"
#include "launcher/output.h"
#include "launcher/process.h"
#include "launcher/signals.h"

#include <chrono>
#include <csignal>
#include <thread>

namespace ddp {
namespace {

using Kind = RoundOutcome::Kind;

// A forwarded signal ended the round. SIGUSR1 asks the workers to checkpoint and exit, not to die: after it, workers
// that all exited 0 end the job as a success, and one that failed (before it or since) ends it as a failure.
RoundOutcome stopped_by(int sig, const RoundResult& r) {
  if (sig == SIGUSR1 && (r.end == RoundEnd::kWorkerFailed || r.end == RoundEnd::kPeerFailed))
    return {Kind::kFailedWhileStopping, r.reason, 0};
  if (sig == SIGUSR1 && !r.failed_while_stopping.empty())
    return {Kind::kFailedWhileStopping, r.failed_while_stopping, 0};
  if (sig == SIGUSR1 && r.end == RoundEnd::kSucceeded) return {Kind::kSucceededAfterStop, "", 0};
  return {Kind::kStopped, "", sig};
}

// What the round's result means before the exit barrier. A worker that failed while the round stopped for ddprun's
// SIGUSR1 did not checkpoint as asked: no requeue then. (A scale-up's SIGUSR1 is no failure either way: the nodes
// meet again and resume from the newest complete checkpoint.)
RoundOutcome outcome_of(const RoundResult& r, ElasticRendezvous* rendezvous) {
  if (rendezvous && r.signal == 0 && (r.end == RoundEnd::kNodesChanged || r.requeued)) {
    const auto why = rendezvous->scale_up_decided();
    if (why || r.end == RoundEnd::kNodesChanged) return {Kind::kMembershipChanged, why.value_or(r.reason), 0};
  }
  if (r.end == RoundEnd::kSucceeded && r.requeued && (r.signal != SIGUSR1 || r.failed_while_stopping.empty()))
    return {Kind::kRequeued, "", 0};
  if (r.signal != 0) return stopped_by(r.signal, r);
  switch (r.end) {
    case RoundEnd::kSucceeded:
      return {Kind::kSucceeded, "", 0};
    case RoundEnd::kPeerStopped:
      return {Kind::kJobStopped, r.reason, 0};
    case RoundEnd::kStoreLost:
      return {Kind::kLost, r.reason, 0};
    case RoundEnd::kWorkerFailed:
    case RoundEnd::kPeerFailed:
    case RoundEnd::kNodesChanged:
      break;
  }
  return {Kind::kFailed, r.reason, 0};
}

// After this node's workers all exited 0: every node's have (torchrun's exit barrier), or another node's news.
// With c10d this node goes on sending keep-alives meanwhile.
RoundOutcome exit_barrier(JobStore& store, int64_t round, ElasticRendezvous* rendezvous) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  try {
    store.report_done(round);
    while (!store.all_done(round)) {
      if (rendezvous) rendezvous->keep_alive();
      if (auto failed = store.failure(round)) return {Kind::kFailed, *failed, 0};
      if (auto why = store.stopped()) return {Kind::kJobStopped, *why, 0};
      if (const int sig = received_stop_signal()) return stopped_by(sig, RoundResult{});
      if (std::chrono::steady_clock::now() >= deadline) {
        launcher_log("warning: the other nodes did not finish within 300 s of this one; exiting");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    return {Kind::kLost, "lost contact with node 0's ddprun at " + store.address() + ": " + first_line(e.what()), 0};
  }
  return {Kind::kSucceeded, "", 0};
}

}  // namespace

RoundOutcome stopped_before_workers(int sig) {
  return {Kind::kStopped, "before the workers started", sig};
}

RoundOutcome settle_round(const RoundResult& r, int64_t round, JobStore* store, ElasticRendezvous* rendezvous) {
  const RoundOutcome outcome = outcome_of(r, rendezvous);
  return outcome.kind == Kind::kSucceeded && store ? exit_barrier(*store, round, rendezvous) : outcome;
}

NextStep next_step(const RoundOutcome& outcome, int64_t restarts, int64_t max_restarts) {
  if (outcome.kind == Kind::kMembershipChanged) return NextStep::kMeetAgain;
  if (outcome.kind == Kind::kFailed && restarts < max_restarts) return NextStep::kRestart;
  return NextStep::kEnd;
}

int end_job(const RoundOutcome& outcome, int64_t max_restarts) {
  switch (outcome.kind) {
    case Kind::kSucceeded:
    case Kind::kSucceededAfterStop:
      return 0;
    case Kind::kJobFinished:
      launcher_log(outcome.reason);
      return 0;
    case Kind::kRequeued:
      launcher_log("the workers checkpointed before a time limit (SIGUSR1): exit " + std::to_string(kRequeueExitCode) +
                   "; run the same command again to resume");
      return kRequeueExitCode;
    case Kind::kStopped:
      launcher_log("stopped by " + signal_name(outcome.signal) + (outcome.reason.empty() ? "" : " " + outcome.reason));
      return 128 + outcome.signal;
    case Kind::kJobStopped:
      launcher_log("error: the job was stopped: " + outcome.reason);
      return 1;
    case Kind::kFailedWhileStopping:
      launcher_log("error: the job failed while its workers stopped for SIGUSR1: " + outcome.reason);
      return 1;
    case Kind::kLost:
      launcher_log("error: " + outcome.reason);
      return 1;
    case Kind::kFailed:
    case Kind::kMembershipChanged:
      break;
  }
  launcher_log("error: the job failed: " + outcome.reason +
               (max_restarts > 0 ? "; no restarts left (--max-restarts " + std::to_string(max_restarts) + " used up)"
                                 : ""));
  return 1;
}

}  // namespace ddp
