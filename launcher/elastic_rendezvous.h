// c10d rendezvous: the nodes of a job meet at --rdzv-endpoint's store, agree on each round's members (MIN to MAX
// nodes), their node ranks and rank 0's MASTER_ADDR/PORT; while a round runs, keep-alives and waiting nodes.
#pragma once

#include "launcher/options.h"
#include "launcher/store.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// Who is in one round of the rendezvous, in node-rank order.
struct Membership {
  int64_t round = 0;
  int64_t node_rank = 0;
  std::vector<std::string> nodes;          // "ADDR (pid P)" of each member
  std::vector<int64_t> agents;             // each member's JobStore agent id
  std::vector<int64_t> local_world_sizes;  // each member's --nproc-per-node
  std::string master_addr;                 // rank 0's node
  int master_port = 0;
  int64_t nnodes() const { return static_cast<int64_t>(nodes.size()); }
};

// Why join() gave no round: the job finished (a node that waited for room: `why` says so), or it was stopped (`why`:
// the stop's reason) or interrupted.
struct NoRound {
  bool job_finished = false;
  std::string why;
};

class ElasticRendezvous {
 public:
  // `store` is the endpoint's (JobStore::at_endpoint). This node's address is --local-addr, else the local address
  // that routes to the endpoint.
  ElasticRendezvous(const LaunchOptions& o, JobStore& store);

  // Joins the first round at or after `from_round` that has not started, and waits until it closes: at MAX nodes
  // at once, at MIN or more once --rdzv-conf last_call_timeout passed without reaching MAX. Node ranks follow the
  // members' (address, pid), as torchrun's DynamicRendezvousHandler sorts them. A node that arrives while a round
  // runs waits for the next one. Returns nullopt when the job finished or was stopped meanwhile, or `interrupted`
  // said so (*none says which). Throws std::runtime_error naming what is missing when fewer than MIN nodes are
  // there within join_timeout (while no round runs).
  std::optional<Membership> join(int64_t from_round, const std::function<bool()>& interrupted, NoRound* none);
  const Membership& current() const { return current_; }

  // While the current round runs, called every --monitor-interval: sends this node's keep-alive when it is due, and
  // returns a member that missed keep_alive_max_attempt keep-alives ("" when all are alive).
  std::string lost_member();
  // Sends this node's keep-alive when it is due (every keep_alive_interval; torchrun's heartbeats go on until its
  // agent shuts down): also while this node's workers have finished and it waits for the other nodes' (the exit
  // barrier), so that they do not count it lost. Returns whether it sent one.
  bool keep_alive();
  // Why the current round makes room for waiting nodes (set by node rank 0 when nodes wait and there is room below
  // MAX), or nullopt.
  std::optional<std::string> scale_up();
  // Whether node rank 0 decided so for the current round (read only).
  std::optional<std::string> scale_up_decided();
  // After the current round succeeded everywhere: waiting nodes may go.
  void mark_finished();
  // The ddprun agents the serving node waits for at the end: the last round's members and the nodes waiting after it
  // (every agent that ever joined when no round closed).
  std::vector<int64_t> agents_to_wait_for();
  const std::string& local_addr() const { return local_addr_; }

 private:
  using Clock = std::chrono::steady_clock;
  Membership assemble(int64_t round, int64_t members, int64_t my_index);
  bool round_running(int64_t round);
  int64_t needed(int64_t round, Clock::time_point waiting_since);
  std::string count_key(int64_t round) const;
  int64_t count(int64_t round);

  const LaunchOptions& o_;
  JobStore& store_;
  std::string local_addr_;
  Membership current_;
  bool has_round_ = false;
  Clock::time_point next_keep_alive_;
  std::map<int64_t, std::pair<std::string, Clock::time_point>> last_keep_alive_;  // node rank -> value, when it changed
};

}  // namespace ddp
