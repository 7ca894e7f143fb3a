// ddprun's round: supervises this node's workers, reports the first failure with its last lines, stops the rest.
#include "launcher/round.h"

#include "base/exit_codes.h"
#include "launcher/signals.h"
#include "launcher/workers.h"
#include "base/first_line.h"
#include "distributed/proc_stat.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe_worker(const Worker& w, int64_t node_rank) {
  return "rank " + std::to_string(w.rank) + " (node " + std::to_string(node_rank) + ", local rank " +
         std::to_string(w.local_rank) + ", pid " + std::to_string(w.process.pid) + ")";
}

void log_last_lines(const Worker& w) {
  const auto lines = w.output->last_lines();
  if (lines.empty()) {
    launcher_log("rank " + std::to_string(w.rank) + " wrote no output");
    return;
  }
  std::string text =
      "[ddprun] last " + std::to_string(lines.size()) + " line(s) of rank " + std::to_string(w.rank) + ":\n";
  for (const auto& line : lines) text += "[ddprun]   | " + line + "\n";
  write_fully(STDERR_FILENO, text);
}

// The worker's own last error line (after "error: "), so that ddprun's one failure line carries the culprit the
// worker named (e.g. rank 0 timed out waiting for rank 1 to join: ddprun reports rank 0, the line names rank 1).
std::string worker_error(const Worker& w) {
  const auto lines = w.output->last_lines();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const auto at = it->find("error: ");
    if (at != std::string::npos) return it->substr(at + 7);
  }
  return "";
}

// The stop in progress: which signal went out, and when SIGKILL follows.
struct Stop {
  bool started = false;
  int signal = 0;
  bool leftovers_terminated = false;  // SIGTERM to what outlived the workers, when the stop signal was another
  bool killed = false;
  Clock::time_point kill_at;
};

// One round: its workers, what ended it, and the stop in progress. Each pass of run() handles signals, exited
// workers, the other nodes' news (through the job store) and the grace period, in that order.
class Round {
 public:
  Round(const LaunchOptions& o, const RoundAssignment& a, const std::string& program_path,
        const std::map<std::string, std::string>& base_env, JobStore* store, ElasticRendezvous* rendezvous)
      : node_rank_(a.node_rank),
        round_(a.round),
        store_(store),
        rendezvous_(rendezvous),
        group_(o, a, program_path, base_env),
        monitor_interval_(std::max<int64_t>(1, static_cast<int64_t>(o.monitor_interval_s * 1000))),
        grace_(std::chrono::milliseconds(static_cast<int64_t>(o.grace_period_s * 1000))) {
    std::ostringstream os;
    os << o.grace_period_s << " s";
    grace_text_ = os.str();
  }

  RoundResult run() {
    while (true) {
      group_.pump(static_cast<int>(std::min<int64_t>(1000, monitor_interval_.count())));
      on_signals();
      on_exited_workers();
      poll_store();
      if (group_.all_exited() && !group_.any_process_left()) break;
      if (group_.all_exited()) on_leftovers();
      if (stop_.started && !stop_.killed && Clock::now() >= stop_.kill_at) kill_after_grace();
    }
    group_.drain_output();
    return result_;
  }

 private:
  void begin_stop(int sig, const std::string& why) {
    if (group_.running() > 0)
      launcher_log(why + ": sending " + signal_name(sig) + " to " + std::to_string(group_.running()) +
                   " worker(s), SIGKILL after " + grace_text_);
    name_stopped_workers(sig);
    group_.signal_all(sig);
    stop_.started = true;
    stop_.signal = sig;
    stop_.kill_at = Clock::now() + grace_;
  }

  // A worker stopped by SIGSTOP or a debugger holds up every collective of the job, and cannot act on `sig`: said
  // by name, since the other ranks can only say they timed out (and a stopped rank 0 serves their store).
  void name_stopped_workers(int sig) const {
    for (const Worker& w : group_.workers()) {
      char state = 0;
      if (w.exited || process_start_time(w.process.pid, &state) == 0 || (state != 'T' && state != 't')) continue;
      launcher_log(describe_worker(w, node_rank_) + " is stopped (SIGSTOP or a debugger): the job's collectives wait for " +
                   "it, and it cannot act on " + signal_name(sig));
    }
  }

  void tell_store(const std::function<void()>& report) {
    if (!store_) return;
    try {
      report();
    } catch (const std::exception& e) {
      launcher_log("could not tell the other nodes: " + first_line(e.what()));
    }
  }

  // ddprun's own SIGINT/SIGTERM: forwarded to the workers; a second one kills them. SIGUSR1 (a scheduler's time
  // limit ahead) is forwarded too, and not told to the other nodes: their workers stop with these, at the same step.
  void on_signals() {
    if (received_stop_signal_count() <= signals_seen_) return;
    signals_seen_ = received_stop_signal_count();
    const int sig = received_stop_signal();
    const bool again = result_.signal != 0 || signals_seen_ > 1;
    // SIGTERM or SIGINT after SIGUSR1 is the stop the job ends by (the workers killed at once), not a failure of
    // theirs.
    if (again && result_.signal == SIGUSR1 && received_last_stop_signal() != SIGUSR1)
      result_.signal = received_last_stop_signal();
    if (result_.signal == 0) {
      result_.signal = sig;
      result_.reason = "ddprun received " + signal_name(sig);
      const std::string why = "node " + std::to_string(node_rank_) + "'s ddprun received " + signal_name(sig);
      if (sig != SIGUSR1) tell_store([&] { store_->report_stopped(why); });
    }
    if (again) {
      launcher_log("received another signal: sending SIGKILL to every worker");
      group_.signal_all(SIGKILL);
      stop_.started = stop_.killed = true;
      stop_.signal = SIGKILL;
    } else {
      begin_stop(sig, "received " + signal_name(sig));
    }
  }

  // A worker that failed outside a stop ends the round: its tail is shown and the other nodes are told.
  void on_exited_workers() {
    for (Worker* w : group_.reap()) {
      if (WIFEXITED(w->wait_status) && WEXITSTATUS(w->wait_status) == kRequeueExitCode) {
        result_.requeued = true;  // checkpointed for a requeue: its peers stop at the same step
        continue;
      }
      if (wait_status_ok(w->wait_status)) continue;
      if (stop_.started) {
        if (result_.failed_while_stopping.empty())
          result_.failed_while_stopping = describe_worker(*w, node_rank_) + " " + describe_wait_status(w->wait_status);
        continue;
      }
      result_.end = RoundEnd::kWorkerFailed;
      result_.reason = describe_worker(*w, node_rank_) + " " + describe_wait_status(w->wait_status);
      group_.read_available(*w);  // what it wrote last belongs to the tail
      launcher_log(result_.reason);
      log_last_lines(*w);
      if (const std::string said = worker_error(*w); !said.empty()) result_.reason += ": " + said;
      tell_store([&] { store_->report_failure(round_, result_.reason); });
      begin_stop(SIGTERM, "rank " + std::to_string(w->rank) + " failed");
    }
  }

  // Every --monitor-interval while nothing stops: whether another node stopped or failed, or the store's ddprun is
  // gone; with c10d also keep-alives and nodes waiting to join.
  void poll_store() {
    if (!store_ || stop_.started || Clock::now() - last_store_poll_ < monitor_interval_) return;
    last_store_poll_ = Clock::now();
    try {
      if (auto why = store_->stopped()) {
        result_ = {RoundEnd::kPeerStopped, *why, 0};
        begin_stop(SIGTERM, "the job was stopped (" + *why + ")");
      } else if (auto failed = store_->failure(round_)) {
        result_ = {RoundEnd::kPeerFailed, *failed, 0};
        begin_stop(SIGTERM, "another node failed (" + *failed + ")");
      } else if (rendezvous_) {
        poll_rendezvous();
      }
    } catch (const std::exception& e) {
      result_ = {RoundEnd::kStoreLost,
                 "lost contact with " + std::string(rendezvous_ ? "the rendezvous" : "node 0's ddprun") + " at " +
                     store_->address() + ": " + first_line(e.what()),
                 0};
      begin_stop(SIGTERM, result_.reason);
    }
  }

  void poll_rendezvous() {
    if (const std::string lost = rendezvous_->lost_member(); !lost.empty()) {
      result_ = {RoundEnd::kPeerFailed, lost, 0};
      store_->report_failure(round_, lost);
      begin_stop(SIGTERM, lost);
    } else if (auto why = rendezvous_->scale_up()) {
      result_ = {RoundEnd::kNodesChanged, *why, 0};
      begin_stop(SIGUSR1, *why + ": the workers checkpoint at the next step and restart with them");
    }
  }

  // The workers exited but left processes in their process groups, which may ignore a forwarded SIGINT (bash's
  // background jobs do).
  void on_leftovers() {
    if (!stop_.started) {
      begin_stop(SIGTERM, "the workers exited but left processes in their process groups");
    } else if (stop_.signal != SIGTERM && !stop_.leftovers_terminated) {
      group_.signal_all(SIGTERM);
      stop_.leftovers_terminated = true;
    }
  }

  void kill_after_grace() {
    launcher_log((group_.running() > 0 ? std::to_string(group_.running()) + " worker(s)"
                                       : std::string("processes the workers left behind")) +
                 " still running " + grace_text_ + " after the stop signal: sending SIGKILL");
    group_.signal_all(SIGKILL);
    stop_.killed = true;
  }

  int64_t node_rank_;
  int64_t round_;
  JobStore* store_;
  ElasticRendezvous* rendezvous_;
  WorkerGroup group_;
  std::chrono::milliseconds monitor_interval_;
  std::chrono::milliseconds grace_;
  std::string grace_text_;
  RoundResult result_;
  Stop stop_;
  int signals_seen_ = 0;
  Clock::time_point last_store_poll_ = Clock::now();
};

}  // namespace

RoundResult run_round(const LaunchOptions& o, const RoundAssignment& a, const std::string& program_path,
                      const std::map<std::string, std::string>& base_env, JobStore* store,
                      ElasticRendezvous* rendezvous) {
  return Round(o, a, program_path, base_env, store, rendezvous).run();
}

}  // namespace ddp
