// ddprun's local worker group: starts this node's workers for one round, routes their output, reaps and signals them.
#pragma once

#include "launcher/assignment.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/process.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

struct Worker {
  int64_t local_rank = 0;
  int64_t rank = 0;
  ChildProcess process;  // process.pid is also the worker's process group id
  bool exited = false;
  int wait_status = 0;
  std::unique_ptr<RankOutput> output;
};

class WorkerGroup {
 public:
  // Starts --nproc-per-node workers of PROGRAM with the ranks of `a` (throws if one cannot start, after killing
  // those already started).
  WorkerGroup(const LaunchOptions& o, const RoundAssignment& a, const std::string& program_path,
              const std::map<std::string, std::string>& base_env);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Waits up to timeout_ms for worker output or a signal to ddprun, and routes the output that arrived.
  void pump(int timeout_ms);
  // Reaps every exited child (workers and orphaned descendants); returns the workers that exited, in order.
  std::vector<Worker*> reap();
  // Sends sig to the process group of every worker that still has a process in it.
  void signal_all(int sig);
  bool all_exited() const;
  size_t running() const;
  // Whether any process is left in any worker's process group (the workers' own children included).
  bool any_process_left() const;
  // Routes what one worker's pipes hold now (they stay open).
  void read_available(Worker& w);
  // Reads what is still in every pipe, closes them and flushes unterminated lines.
  void drain_output();
  const std::vector<Worker>& workers() const { return workers_; }

 private:
  void read_pipe(Worker& w, int stream);
  void stop_started_workers();

  std::vector<Worker> workers_;
};

// Where rank `rank`'s output goes for restart round `restart_count` under --log-dir.
std::string rank_log_path(const std::string& log_dir, int64_t restart_count, int64_t rank);

}  // namespace ddp
