// Collective helpers over the job's process group (no-ops for a world of one).
#pragma once

#include "distributed/context.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace ddp {

// In-place all-reduce SUM of a CPU/device tensor; waits for completion.
void all_reduce_sum(const DistContext& ctx, torch::Tensor& t);
// All-reduce SUM of doubles (as float64), returns the reduced values.
std::vector<double> all_reduce_sum(const DistContext& ctx, const std::vector<double>& values);
// All-reduce SUM of integer counts (as int64: exact at any size), returns the reduced values.
std::vector<int64_t> all_reduce_sum_exact(const DistContext& ctx, const std::vector<int64_t>& values);
// All-reduce MAX of one value.
double all_reduce_max(const DistContext& ctx, double value);
// Blocks until every rank arrives.
void barrier(const DistContext& ctx);
// Rank 0's values of `tensors` in every rank's tensors, in place: DDP's _sync_module_states (c10d's
// broadcast_coalesced in buckets of DDP's broadcast_bucket_size, 250 MiB).
void broadcast_from_rank0(const DistContext& ctx, const std::vector<torch::Tensor>& tensors);

// A MAX all-reduce of one value that runs while the caller goes on: start() now, wait() for it later (every
// rank must start() in the same order relative to its other collectives, as for any collective).
class AsyncAllReduceMax {
 public:
  explicit AsyncAllReduceMax(const DistContext& ctx) : ctx_(ctx) {}
  ~AsyncAllReduceMax();
  void start(double value);
  bool pending() const { return pending_; }
  // The reduced value of the last start(); the value itself for a world of one.
  double wait();

 private:
  const DistContext& ctx_;
  std::vector<at::Tensor> tensors_;
  c10::intrusive_ptr<c10d::Work> work_;
  double local_ = 0;
  bool pending_ = false;
};

}  // namespace ddp

namespace ddp {

// A 62-bit FNV-1a digest of the tensors' bytes (bit-exact comparison of replicas).
int64_t tensors_digest(const std::vector<torch::Tensor>& tensors);
// Throws std::runtime_error naming the step if ranks' digests differ.
void check_replicas_identical(const DistContext& ctx, const std::vector<torch::Tensor>& tensors, int64_t step);

}  // namespace ddp

namespace ddp {

// Every rank's copy of `t` (same shape on all ranks), in rank order, on the run's device. A world of one returns {t}.
std::vector<torch::Tensor> all_gather(const DistContext& ctx, const torch::Tensor& t);
// Rank `root`'s bytes on every rank (others' input is replaced).
void broadcast_bytes(const DistContext& ctx, std::vector<char>& bytes, int64_t root = 0);
// The first member's bytes on every member of `group` (DistContext::member_group; CPU tensors), others' input
// replaced; the job's other ranks take no part. It marks no phase (PhaseScope): it may run off the training thread.
void broadcast_bytes(c10d::Backend& group, std::vector<char>& bytes);

}  // namespace ddp
