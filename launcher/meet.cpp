// meet: the c10d rendezvous, the static job store's round barrier, or a lone node; torchrun's rank assignment.
#include "launcher/meet.h"

#include "launcher/output.h"
#include "launcher/signals.h"

namespace ddp {
namespace {

using Kind = RoundOutcome::Kind;

// `a` with first_rank and world_size for node a.node_rank of nodes that run local_world_sizes[n] workers each
// (node-rank order), as torchrun's agent assigns ranks (_assign_worker_ranks): each node's ranks follow those of the
// nodes before it, so nodes may run different numbers of workers.
RoundAssignment with_ranks(RoundAssignment a, const std::vector<int64_t>& local_world_sizes) {
  a.first_rank = 0;
  a.world_size = 0;
  for (size_t n = 0; n < local_world_sizes.size(); ++n) {
    if (static_cast<int64_t>(n) < a.node_rank) a.first_rank += local_world_sizes[n];
    a.world_size += local_world_sizes[n];
  }
  return a;
}

// "node 1 of 2: ranks 2..3 of 4, MASTER_ADDR=... MASTER_PORT=..." for a node of `local_workers` workers.
std::string describe_node(const RoundAssignment& a, int64_t local_workers) {
  const int64_t first = a.first_rank, last = first + local_workers - 1;
  return "node " + std::to_string(a.node_rank) + " of " + std::to_string(a.nnodes) + ": " +
         (first == last ? "rank " + std::to_string(first)
                        : "ranks " + std::to_string(first) + ".." + std::to_string(last)) +
         " of " + std::to_string(a.world_size) + ", MASTER_ADDR=" + a.master_addr +
         " MASTER_PORT=" + std::to_string(a.master_port);
}

Meeting ended(Kind kind, const std::string& why) { return {std::nullopt, {kind, why, 0}}; }

// A stop signal arrived while meeting: the job ends before the workers start, and the other nodes learn so when
// `store` is given (this node is one of the round's).
Meeting interrupted_meeting(JobStore* store, int64_t node_rank) {
  if (store) store->report_stopped("node " + std::to_string(node_rank) + "'s ddprun was interrupted");
  return {std::nullopt, stopped_before_workers(received_stop_signal())};
}

Meeting join_rendezvous(const LaunchOptions& o, RoundAssignment a, JobStore& store, ElasticRendezvous& rendezvous) {
  NoRound none;
  const auto m = rendezvous.join(a.round, interrupted, &none);
  if (!m) {
    // Not a member of a round: its ddprun ends, the job goes on without it (torchrun's agent, stopped by a signal,
    // leaves the rendezvous open to the others).
    if (interrupted()) return interrupted_meeting(nullptr, o.node_rank);
    return ended(none.job_finished ? Kind::kJobFinished : Kind::kJobStopped, none.why);
  }
  a.round = m->round;
  a.node_rank = m->node_rank;
  a.nnodes = m->nnodes();
  a.master_addr = m->master_addr;
  a.master_port = m->master_port;
  a = with_ranks(a, m->local_world_sizes);
  store.set_membership(a.nnodes, a.node_rank);
  std::string members;
  for (const auto& n : m->nodes) members += (members.empty() ? "" : ", ") + n;
  launcher_log("rendezvous round " + std::to_string(a.round) + ": " + describe_node(a, o.nproc_per_node) +
               " (nodes: " + members + ")");
  return {a, {}};
}

Meeting join_store(const LaunchOptions& o, RoundAssignment a, JobStore& store) {
  if (const std::string why = store.join_round(a.round, interrupted); !why.empty())
    return interrupted() ? interrupted_meeting(&store, a.node_rank) : ended(Kind::kJobStopped, why);
  a = with_ranks(a, store.local_world_sizes(a.round));
  if (a.round == 0)
    launcher_log(describe_node(a, o.nproc_per_node) + ", launchers meet at " + store.address());
  return {a, {}};
}

}  // namespace

Meeting meet(const LaunchOptions& o, RoundAssignment next, JobStore* store, ElasticRendezvous* rendezvous) {
  Meeting m;
  if (rendezvous) {
    m = join_rendezvous(o, next, *store, *rendezvous);
  } else if (store) {
    m = join_store(o, next, *store);
  } else {
    m.assignment = with_ranks(next, {o.nproc_per_node});
    if (next.round == 0) launcher_log(describe_node(*m.assignment, o.nproc_per_node));
  }
  if (m.assignment && interrupted()) return interrupted_meeting(store, m.assignment->node_rank);
  return m;
}

}  // namespace ddp
