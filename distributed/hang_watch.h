// HangWatch: when a rank has waited for its peers longer than dist.hang_report_s, every rank posts what it is doing
// through the store (not through the stuck process group) and rank 0 says one verdict naming where each rank is; a
// rank that fails posts its error there (tell_peers_of_failure), which ends the ranks left waiting for it.
#pragma once

#include "distributed/context.h"
#include "distributed/thread_stack.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// What a rank posts when asked: its Activity's snapshot, its training thread's stack and its other threads'.
struct HangReport {
  int64_t rank = 0;
  Activity::Snapshot activity;
  std::vector<std::string> stack;          // innermost frame first
  std::vector<std::string> other_threads;  // "threads 12 (gloo), 13 (gloo):" headers, each followed by its frames
};

std::string hang_report_text(const Activity::Snapshot& s, const std::vector<std::string>& stack,
                             const std::vector<ThreadStacks>& other_threads = {});
std::optional<HangReport> parse_hang_report(int64_t rank, const std::string& text);

// One line: "hang at step 412: ranks 0,2,3 wait in gradient all-reduce for 61 s (step 412, collectives started: 1650;
// waiting for collective #1647, gradient bucket 0 of 5); rank 1 (host a, pid 123) is in data for 64 s (step 412,
// collectives started: 1646)". `silent`: why a rank that posted
// nothing does not answer, by rank ("stopped", "exited", "" when unknown); `views` name hosts and pids.
std::string hang_verdict(const std::vector<HangReport>& reports, int64_t world_size, const std::vector<RankView>& views,
                         const std::function<std::string(int64_t)>& silent);

// Why a rank that posted nothing does not answer, from its process where this one sees it (pid_visible): "stopped
// (SIGSTOP or a debugger)", "exited", or "" (running, or not seen from here).
std::string silent_rank_state(const RankView& view);

// After this rank failed with `line` (its error, without the "[rank R] error: " prefix): posts it through
// ctx.watch_store for the others' HangWatch (the first rank to post is the one named) and counts this rank in. A rank
// whose process serves the store (rank 0 without a launcher's store) then waits until every rank has read it or
// failed too, at most two of the watch's polls and a second, so that its exit does not take the message with it.
// Every store request is bounded the same way: a store that does not answer (a link gone) delays the exit by no
// more. Nothing for a world of one.
void tell_peers_of_failure(const DistContext& ctx, const std::string& line);

class HangWatch {
 public:
  using Say = std::function<void(const std::string& line)>;
  // Watches a distributed run from a thread of its own over ctx.watch_store; none for a world of one (nothing to
  // wait for) or without a store client. report_after_s: dist.hang_report_s. The calling thread is the one whose
  // stack a rank posts; rank 0 writes every rank's into stacks_dir/step-<N>.txt and names it in the verdict.
  // When another rank posts its failure (tell_peers_of_failure), `fail` gets "rank N (host h, pid p) failed: ..."
  // once this rank has stayed a whole poll in a phase that waits for its peers (a collective, the gradient
  // all-reduce): a rank busy with its own work (a checkpoint's write) finishes it first. `fail` is to end the process
  // (the training thread is held in the collective); if it returns, the watch ends. Never while the HangWatch is
  // being destroyed (this rank's own error goes first).
  static std::unique_ptr<HangWatch> start(const DistContext& ctx, double report_after_s, std::string stacks_dir,
                                          Say say, Say fail);
  ~HangWatch();  // stops the thread (left behind, owning what it uses, if a store call holds it past 2 s)

  struct State;

 private:
  explicit HangWatch(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace ddp
