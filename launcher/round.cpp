// ddprun's round: supervises this node's workers, reports the first failure with its last lines, stops the rest.
#include "launcher/round.h"

#include "launcher/signals.h"
#include "launcher/workers.h"
#include "base/first_line.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe_worker(const Worker& w, const LaunchOptions& o) {
  return "rank " + std::to_string(w.rank) + " (node " + std::to_string(o.node_rank) + ", local rank " +
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

}  // namespace

void launcher_log(const std::string& message) { write_fully(STDERR_FILENO, "[ddprun] " + message + "\n"); }

RoundResult run_round(const LaunchOptions& o, int64_t restart_count, const std::string& program_path,
                      const std::map<std::string, std::string>& base_env, JobStore* store) {
  WorkerGroup group(o, restart_count, program_path, base_env);
  RoundResult result;
  Stop stop;
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(o.grace_period_s * 1000));
  std::ostringstream grace_os;
  grace_os << o.grace_period_s << " s";
  const std::string grace_text = grace_os.str();
  auto begin_stop = [&](int sig, const std::string& why) {
    if (group.running() > 0)
      launcher_log(why + ": sending " + signal_name(sig) + " to " + std::to_string(group.running()) +
                   " worker(s), SIGKILL after " + grace_text);
    group.signal_all(sig);
    stop.started = true;
    stop.signal = sig;
    stop.kill_at = Clock::now() + grace;
  };
  auto tell_store = [&](const std::function<void()>& report) {
    if (!store) return;
    try {
      report();
    } catch (const std::exception& e) {
      launcher_log("could not tell the other nodes: " + first_line(e.what()));
    }
  };
  int signals_seen = 0;
  auto last_store_poll = Clock::now();

  while (true) {
    group.pump(100);

    if (received_stop_signal_count() > signals_seen) {
      signals_seen = received_stop_signal_count();
      const int sig = received_stop_signal();
      const bool again = result.signal != 0 || signals_seen > 1;
      if (result.signal == 0) {
        result.signal = sig;
        result.reason = "ddprun received " + signal_name(sig);
        const std::string why = "node " + std::to_string(o.node_rank) + "'s ddprun received " + signal_name(sig);
        tell_store([&] { store->report_stopped(why); });
      }
      if (again) {
        launcher_log("received another signal: sending SIGKILL to every worker");
        group.signal_all(SIGKILL);
        stop.started = stop.killed = true;
        stop.signal = SIGKILL;
      } else {
        begin_stop(sig, "received " + signal_name(sig));
      }
    }

    for (Worker* w : group.reap()) {
      if (stop.started || wait_status_ok(w->wait_status)) continue;
      result.end = RoundEnd::kWorkerFailed;
      result.reason = describe_worker(*w, o) + " " + describe_wait_status(w->wait_status);
      group.read_available(*w);  // what it wrote last belongs to the tail
      launcher_log(result.reason);
      log_last_lines(*w);
      if (const std::string said = worker_error(*w); !said.empty()) result.reason += ": " + said;
      tell_store([&] { store->report_failure(restart_count, result.reason); });
      begin_stop(SIGTERM, "rank " + std::to_string(w->rank) + " failed");
    }

    if (store && !stop.started && Clock::now() - last_store_poll >= std::chrono::milliseconds(100)) {
      last_store_poll = Clock::now();
      try {
        if (auto why = store->stopped()) {
          result = {RoundEnd::kPeerStopped, *why, 0};
          begin_stop(SIGTERM, "the job was stopped (" + *why + ")");
        } else if (auto failed = store->failure(restart_count)) {
          result = {RoundEnd::kPeerFailed, *failed, 0};
          begin_stop(SIGTERM, "another node failed (" + *failed + ")");
        }
      } catch (const std::exception& e) {
        result = {RoundEnd::kStoreLost,
                  "lost contact with node 0's ddprun at " + store->address() + ": " + first_line(e.what()), 0};
        begin_stop(SIGTERM, result.reason);
      }
    }

    if (group.all_exited()) {
      if (!group.any_process_left()) break;
      // What the workers left behind may ignore a forwarded SIGINT (bash's background jobs do).
      if (!stop.started) {
        begin_stop(SIGTERM, "the workers exited but left processes in their process groups");
      } else if (stop.signal != SIGTERM && !stop.leftovers_terminated) {
        group.signal_all(SIGTERM);
        stop.leftovers_terminated = true;
      }
    }
    if (stop.started && !stop.killed && Clock::now() >= stop.kill_at) {
      launcher_log((group.running() > 0 ? std::to_string(group.running()) + " worker(s)"
                                        : std::string("processes the workers left behind")) +
                   " still running " + grace_text + " after the stop signal: sending SIGKILL");
      group.signal_all(SIGKILL);
      stop.killed = true;
    }
  }
  group.drain_output();
  return result;
}

}  // namespace ddp
