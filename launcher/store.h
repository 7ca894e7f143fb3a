// ddprun's job store across nodes: a TCPStore served by node 0's ddprun on master_port + 1 (static rendezvous) or
// by the ddprun on --rdzv-endpoint's host (c10d rendezvous).
//
// Every node uses it to start each round together, to learn that some node failed or was stopped, and to exit
// together; with c10d also to meet (launcher/elastic_rendezvous.h) and to tell the others it is alive.
#pragma once

#include "launcher/options.h"
#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

class JobStore {
 public:
  // Node 0 serves (on --master-addr's address only), the others connect (retrying up to --rdzv-conf timeout).
  // With a `secret` (DDPTRAIN_JOB_SECRET) keys and values are sealed with it. Throws std::runtime_error.
  JobStore(const LaunchOptions& o, const std::string& secret);
  // c10d: serves the store at --rdzv-endpoint when its host is this machine (or --rdzv-conf is_host=1; a port already
  // taken here means another ddprun of this machine serves it), else connects to it.
  static std::unique_ptr<JobStore> at_endpoint(const LaunchOptions& o, const std::string& secret);
  ~JobStore();

  std::string address() const;
  bool serves() const { return serves_; }
  // This ddprun's id among all that joined the job (static: its node rank).
  int64_t agent_id() const { return agent_id_; }
  // The nodes of the current round (static: the whole job; c10d: set at each rendezvous).
  void set_membership(int64_t nnodes, int64_t node_rank);
  int64_t node_rank() const { return node_rank_; }
  int64_t nnodes() const { return nnodes_; }

  // Raw access for the rendezvous (names without the "ddprun/" prefix).
  int64_t add(const std::string& name, int64_t delta);
  void set(const std::string& name, const std::string& value);
  std::optional<std::string> get_if_set(const std::string& name);
  // Waits up to the store's timeout for the key.
  std::string get(const std::string& name);
  // Sets `name` to `value` unless it is set; returns what it holds then.
  std::string set_once(const std::string& name, const std::string& value);
  // Node 0 (c10d: the first node) publishes its flags; the others compare theirs (throws LaunchUsageError on a
  // mismatch). Static: also refuses a second ddprun with the same --node-rank.
  void check_same_job(const LaunchOptions& o);

  // Waits until every node has arrived at `round` (0 = first start, K = K-th restart). Returns "" when all are
  // there, or why it gave up: another node stopped the job, or `interrupted()` said so. Throws on timeout.
  std::string join_round(int64_t round, const std::function<bool()>& interrupted);
  // After join_round(round) returned "": each node's --nproc-per-node, in node-rank order.
  std::vector<int64_t> local_world_sizes(int64_t round);

  // What some node reported as failing `round` (empty: nothing yet).
  std::optional<std::string> failure(int64_t round);
  void report_failure(int64_t round, const std::string& what);
  // Why the whole job was stopped (a signal, a config mismatch), with no restart.
  std::optional<std::string> stopped();
  void report_stopped(const std::string& why);

  void report_done(int64_t round);
  bool all_done(int64_t round);
  // The last call of every ddprun but the serving one before it exits; the serving one waits for those named (agent
  // ids) so that its store outlives their use.
  void leave();
  void wait_for_others_to_leave(const std::vector<int64_t>& agents, double timeout_s,
                                const std::function<bool()>& interrupted);

 private:
  JobStore() = default;
  std::string key(const std::string& name) const { return "ddprun/" + name; }
  bool all_nodes_have(const std::string& name_prefix, int64_t first_node);

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t nnodes_ = 1, node_rank_ = 0, agent_id_ = 0;
  int64_t local_world_size_ = 1;  // static: this node's --nproc-per-node
  double timeout_s_ = 600;
  bool serves_ = false;
  std::string address_;
};

}  // namespace ddp
