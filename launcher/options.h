// LaunchOptions: what the user asked ddprun for (its parsed flags), fixed once the command line is parsed.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp {

// Which std streams of a worker a --redirects/--tee value selects: 1 = stdout, 2 = stderr, 3 = both.
// Either one value for every local rank ("3") or per local rank ("0:1,1:3"; unnamed ranks get 0).
struct StreamSelection {
  int all = 0;
  std::map<int64_t, int> by_local_rank;
  int for_local_rank(int64_t local_rank) const {
    if (by_local_rank.empty()) return all;
    const auto it = by_local_rank.find(local_rank);
    return it == by_local_rank.end() ? 0 : it->second;
  }
};
constexpr int kStdout = 1;
constexpr int kStderr = 2;

// --rdzv-conf's keys (torchrun's names and defaults), in seconds.
struct RendezvousConf {
  double join_timeout = 600;      // how long nodes wait for each other (static: the whole job's nodes; c10d: --nnodes MIN)
  double last_call_timeout = 30;  // c10d: after MIN nodes joined, how long a round stays open for more (up to MAX)
  double close_timeout = 30;      // c10d: how long the endpoint's ddprun waits for the others to leave at the end
  double read_timeout = 60;       // how long one request to the launchers' store may take (launcher/bounded_store.h)
  double keep_alive_interval = 5;     // c10d: each node's keep-alive period while its workers run
  int64_t keep_alive_max_attempt = 3;  // c10d: keep-alives missed before a node counts as lost
  int is_host = -1;                    // c10d: 1 = serve the endpoint's store, 0 = never, -1 = when the host is this one
};

// The flags as given (launcher/flags.cpp declares each with its default); what a round decides is a RoundAssignment.
struct LaunchOptions {
  int64_t nnodes = 1;     // static: the nodes of the job; c10d: at most this many (--nnodes MIN:MAX's MAX)
  int64_t min_nodes = 1;  // c10d: a round starts with at least this many nodes (MIN)
  int64_t nproc_per_node = 1;
  int64_t node_rank = 0;                 // static: this node's rank (c10d: agreed at each rendezvous instead)
  std::string master_addr = "127.0.0.1";  // static: node 0's address (c10d: agreed at each rendezvous instead)
  int master_port = 29500;
  bool standalone = false;          // one node, a free port on 127.0.0.1, a random run id
  int64_t max_restarts = 0;
  std::string log_dir;              // "" = no log files
  StreamSelection redirects;        // streams that go to log files only
  StreamSelection tee;              // streams that go to log files and the console
  bool streams_chosen = false;      // --redirects or --tee given (else --log-dir keeps every stream)
  std::string run_id = "none";      // TORCHELASTIC_RUN_ID
  std::string role = "default";     // ROLE_NAME
  std::string rdzv_backend = "static";  // "static": --node-rank and --master-addr given; "c10d": nodes meet at an endpoint
  std::string rdzv_endpoint;             // as written ("" = none)
  std::string rdzv_host;                 // c10d: --rdzv-endpoint's host (its ddprun serves the rendezvous store)
  int rdzv_port = 29400;                 // c10d: --rdzv-endpoint's port (torchrun's default)
  RendezvousConf rdzv_conf;
  std::string local_addr;           // how other nodes reach this one ("" = the address that routes to the endpoint)
  double monitor_interval_s = 0.1;  // how often ddprun looks at its workers and the other nodes (torchrun's default)
  double grace_period_s = 30;       // SIGTERM to SIGKILL when stopping workers (torchrun's default)
  bool help = false;
  std::vector<std::string> program;  // PROGRAM ARGS...
  // --signals-to-handle: what ddprun catches and forwards to its workers (torchrun's default list, and SIGUSR1)
  std::vector<int> signals_to_handle = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1};
  // --local-ranks-filter: the local ranks whose output reaches the console (empty: all); log files keep every rank's
  std::vector<int64_t> local_ranks_filter;
};

// Whether nodes meet at a --rdzv-endpoint (torchrun's c10d rendezvous) rather than at --master-addr with --node-rank.
inline bool elastic(const LaunchOptions& o) { return o.rdzv_backend == "c10d"; }

// A usage problem: ddprun prints "error: <what>" and exits 2.
struct LaunchUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ddp
