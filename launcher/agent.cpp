// run_agent: the loop of torch/distributed/elastic/agent/server/api.py's SimpleElasticAgent._invoke_run, per round.
#include "launcher/agent.h"

#include "launcher/meet.h"
#include "launcher/outcome.h"
#include "launcher/output.h"
#include "launcher/round.h"

namespace ddp {
namespace {

void close_after_failure(JobStore& store, const RoundOutcome& outcome) {
  try {
    store.report_stopped("the job failed: " + outcome.reason);
  } catch (const std::exception& e) {
    launcher_log("could not close the rendezvous: " + std::string(e.what()));
  }
}

}  // namespace

// torchelastic: _rendezvous, _start_workers, _monitor_workers until the group is no longer healthy, _stop_workers,
// then _exit_barrier on success, _restart_workers while restarts remain after a failure, and a new rendezvous
// (no restart counted) when nodes wait to join; anything else ends the job.
int run_agent(const LaunchOptions& o, const AgentJob& job) {
  RoundAssignment next = job.first;
  for (;; ++next.round) {
    const Meeting met = meet(o, next, job.store, job.rendezvous);
    if (met.assignment) next = *met.assignment;
    const RoundOutcome outcome =
        met.assignment ? settle_round(run_round(o, next, job.program_path, job.env, job.store, job.rendezvous),
                                      next.round, job.store, job.rendezvous)
                       : met.ended;
    switch (next_step(outcome, next.restart_count, o.max_restarts)) {
      case NextStep::kMeetAgain:
        launcher_log("the nodes meet again (" + outcome.reason + ")");
        break;
      case NextStep::kRestart:
        ++next.restart_count;
        launcher_log("restarting all " + std::to_string(o.nproc_per_node) + " local worker(s): restart " +
                     std::to_string(next.restart_count) + " of --max-restarts " + std::to_string(o.max_restarts) +
                     " (TORCHELASTIC_RESTART_COUNT=" + std::to_string(next.restart_count) + ")" +
                     (job.rendezvous ? " after the nodes meet again" : ""));
        break;
      case NextStep::kEnd:
        if (outcome.kind == RoundOutcome::Kind::kSucceeded && job.rendezvous) job.rendezvous->mark_finished();
        // A job failed for good closes its rendezvous (torchelastic's shutdown on ChildFailedError): a node still
        // waiting to join ends instead of starting the job again on its own.
        if (outcome.kind == RoundOutcome::Kind::kFailed && job.rendezvous) close_after_failure(*job.store, outcome);
        return end_job(outcome, o.max_restarts);
    }
  }
}

}  // namespace ddp
