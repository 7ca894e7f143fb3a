// ddprun's job store across nodes (TCPStore served by node 0's ddprun on master_port + 1).
//
// Every node uses it to start each restart round together, to learn that some node failed or was stopped,
// and to exit together.
#pragma once

#include "launcher/options.h"
#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <optional>
#include <string>

namespace ddp {

class JobStore {
 public:
  // Node 0 serves (on --master-addr's address only), the others connect (retrying up to --rdzv-conf timeout).
  // With a `secret` (DDPTRAIN_JOB_SECRET) keys and values are sealed with it. Throws std::runtime_error.
  JobStore(const LaunchOptions& o, const std::string& secret);
  ~JobStore();

  std::string address() const;
  // Node 0 publishes its flags; the others compare theirs (throws LaunchUsageError on a mismatch). Also
  // refuses a second ddprun with the same --node-rank.
  void check_same_job(const LaunchOptions& o);

  // Waits until every node has arrived at `round` (0 = first start, K = K-th restart). Returns "" when all are
  // there, or why it gave up: another node stopped the job, or `interrupted()` said so. Throws on timeout.
  std::string join_round(int64_t round, const std::function<bool()>& interrupted);

  // What some node reported as failing `round` (empty: nothing yet).
  std::optional<std::string> failure(int64_t round);
  void report_failure(int64_t round, const std::string& what);
  // Why the whole job was stopped (a signal, a config mismatch), with no restart.
  std::optional<std::string> stopped();
  void report_stopped(const std::string& why);

  void report_done(int64_t round);
  bool all_done(int64_t round);
  // The last call of nodes other than 0 before they exit; node 0 waits for them so its store outlives their use.
  void leave();
  void wait_for_others_to_leave(double timeout_s, const std::function<bool()>& interrupted);

 private:
  std::string key(const std::string& name) const { return "ddprun/" + name; }
  std::optional<std::string> get_if_set(const std::string& name);
  bool all_nodes_have(const std::string& name_prefix, int64_t first_node);

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t nnodes_, node_rank_;
  double timeout_s_;
  std::string address_;
};

}  // namespace ddp
