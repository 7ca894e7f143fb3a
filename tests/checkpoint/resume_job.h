// Shared by the checkpoint resume, line and fault tests: the small resumable job, running it, the fault shim, a
// worker killed under ddprun.
#pragma once

#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace ddp::test {

// 320 samples / batch 16 = 20 micro-batches per epoch on 1 rank (10 per rank on 2); a checkpoint every 4 steps,
// the last 3 kept; 3 epochs = 60 steps.
inline std::string ckpt_job_config(const TempDir& dir) {
  return write_tiny_job(dir, 320, 32, 12,
                        {"job.seed=21", "data.batch_size=16", "model.name=net", "model.dropout=0.5",
                         "optimizer.lr=0.05", "optimizer.momentum=0.9", "training.epochs=3", "checkpoint.every_steps=4",
                         "checkpoint.keep_last=3", "metrics.log_every_steps=5"});
}

// ddptrain CFG ARGS on one rank; `env` ("K=V ...") goes first.
inline CommandResult ckpt_train(const std::string& cfg, const std::string& args, const std::string& env = "") {
  return run_command(env + " OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " " + args);
}

inline bool ckpt_same_bytes(const std::string& a, const std::string& b) { return read_file(a) == read_file(b); }

// The prefix that runs rank `node` as the only rank of node `node`, in the working directory `cwd` (created): with
// job.out_dir relative, a node-local disk.
inline std::string on_node(int node, const std::string& cwd) {
  std::filesystem::create_directories(cwd);
  return "env -C " + shell_quote(cwd) + " LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=" + std::to_string(node);
}

// Environment running a command under the LD_PRELOAD fault shim (tests/support/shim): the nth `op` (write, fsync,
// rename, unlink, any) on a path containing `path` gets `action` (kill = SIGKILL there; term = SIGTERM, then the call
// goes on; stop = a write halted by SIGSTOP halfway; enospc, erofs, eio = that errno from then on).
inline std::string fault_env(const std::string& op, const std::string& path, const std::string& action, int nth = 1) {
  return "LD_PRELOAD=" + shell_quote(DDP_FAULT_SHIM) + " DDP_FAULT_OP=" + op + " DDP_FAULT_PATH=" + shell_quote(path) +
         " DDP_FAULT_ACTION=" + action + " DDP_FAULT_NTH=" + std::to_string(nth);
}

// `run` (ddprun's flags and a ddptrain command logging every step, without job.out_dir) under ddprun to dir/full, then
// under --max-restarts=1 to dir/killed with a worker SIGKILLed once step kill_at is logged: the restarted round resumes
// and each of `files` ends byte for byte as the uninterrupted run's. Returns the uninterrupted run's output.
inline std::string expect_killed_worker_resumes_bit_identical(const TempDir& dir, const std::string& run, int kill_at,
                                                              const std::vector<std::string>& files = {"model.pt"}) {
  const CommandResult full = run_command(binary_dir() + "/ddprun" + run + " --job.out_dir=" + dir / "full");
  EXPECT_EQ(full.exit_code, 0) << full.output;
  const CommandResult killed = run_ddprun_killing_a_worker(
      "--max-restarts=1" + run + " --job.out_dir=" + dir / "killed", dir / "killed", kill_at);
  const std::string log = read_file(dir / "killed.log");
  EXPECT_NE(killed.output.find("rc 0"), std::string::npos) << killed.output << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  for (const std::string& f : files) EXPECT_EQ(read_file(dir / ("full/" + f)), read_file(dir / ("killed/" + f))) << f;
  return full.output;
}

}  // namespace ddp::test
