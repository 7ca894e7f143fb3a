// Collective helpers: all_reduce sums/max and barrier on the c10d process group. Each waits in the phase "collective"
// (PhaseScope): a rank there waits for its peers, which is what the hang watch looks for.
#include "distributed/reduce.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

namespace ddp {

void all_reduce_sum(const DistContext& ctx, torch::Tensor& t) {
  if (!ctx.distributed()) return;
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  std::vector<at::Tensor> tensors{t};
  ctx.group->allreduce(tensors, c10d::AllreduceOptions{})->wait();
}

std::vector<double> all_reduce_sum(const DistContext& ctx, const std::vector<double>& values) {
  if (!ctx.distributed()) return values;
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  torch::Tensor t = torch::tensor(values, torch::kFloat64).to(ctx.device);
  all_reduce_sum(ctx, t);
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

std::vector<int64_t> all_reduce_sum_exact(const DistContext& ctx, const std::vector<int64_t>& values) {
  if (!ctx.distributed()) return values;
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  torch::Tensor t = torch::tensor(values, torch::kInt64).to(ctx.device);
  all_reduce_sum(ctx, t);
  t = t.cpu();
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

double all_reduce_max(const DistContext& ctx, double value) {
  AsyncAllReduceMax reduce(ctx);
  reduce.start(value);
  return reduce.wait();
}

void barrier(const DistContext& ctx) {
  if (!ctx.distributed()) return;
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  ctx.group->barrier()->wait();
}

void broadcast_from_rank0(const DistContext& ctx, const std::vector<torch::Tensor>& tensors) {
  if (!ctx.distributed() || tensors.empty()) return;
  constexpr size_t kBroadcastBucketBytes = 250u * 1024 * 1024;  // DDP's broadcast_bucket_size
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> detached;
  for (const auto& t : tensors) detached.push_back(t.detach());
  c10d::broadcast_coalesced(ctx.group, detached, kBroadcastBucketBytes, 0);
}

AsyncAllReduceMax::~AsyncAllReduceMax() {
  // An unfinished collective is left to the process group (its timeout ends it); never throw from here.
  work_.reset();
}

void AsyncAllReduceMax::start(double value) {
  if (pending_) wait();
  local_ = value;
  pending_ = true;
  if (!ctx_.distributed()) return;
  tensors_ = {torch::tensor({value}, torch::kFloat64).to(ctx_.device)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  // A backend may run a small all-reduce before it returns (shared memory does when idle): waiting for the peers.
  PhaseScope waiting(*ctx_.activity, Phase::kCollective);
  work_ = ctx_.group->allreduce(tensors_, opts);
}

double AsyncAllReduceMax::wait() {
  if (!pending_) throw std::logic_error("AsyncAllReduceMax::wait without start");
  pending_ = false;
  if (!ctx_.distributed()) return local_;
  PhaseScope waiting(*ctx_.activity, Phase::kCollective);
  auto work = std::move(work_);
  work->wait();
  return tensors_[0].cpu().item<double>();
}

}  // namespace ddp

namespace ddp {

int64_t tensors_digest(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& t : tensors) {
    torch::Tensor c = t.detach().cpu().contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    const size_t n = c.numel() * c.element_size();
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return static_cast<int64_t>(h >> 2);
}

void check_replicas_identical(const DistContext& ctx, const std::vector<torch::Tensor>& tensors, int64_t step) {
  if (!ctx.distributed()) return;
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  const int64_t h = tensors_digest(tensors);
  std::vector<at::Tensor> v{torch::tensor({h, -h}, torch::kInt64).to(ctx.device)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  ctx.group->allreduce(v, opts)->wait();
  torch::Tensor r = v[0].cpu();
  const int64_t max_h = r[0].item<int64_t>(), min_h = -r[1].item<int64_t>();
  if (max_h != min_h)
    throw std::runtime_error("replicas diverged after step " + std::to_string(step) + ": rank " +
                             std::to_string(ctx.rank) + " parameter digest " + std::to_string(h) +
                             " differs from another rank's (min " + std::to_string(min_h) + ", max " +
                             std::to_string(max_h) + ")");
}

}  // namespace ddp

namespace ddp {

std::vector<torch::Tensor> all_gather(const DistContext& ctx, const torch::Tensor& t) {
  if (!ctx.distributed()) return {t.clone()};
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  std::vector<at::Tensor> input{t.contiguous().to(ctx.device)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int64_t r = 0; r < ctx.world_size; ++r) output[0].push_back(torch::empty_like(input[0]));
  ctx.group->allgather(output, input)->wait();
  return output[0];
}

namespace {

// The root's bytes through `broadcast` (its size, then the bytes when there are any), as tensors on `device`.
template <class Broadcast>
void broadcast_bytes_with(const Broadcast& broadcast, bool root, const torch::Device& device,
                          std::vector<char>& bytes) {
  std::vector<at::Tensor> size{torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64).to(device)};
  broadcast(size);
  const int64_t n = size[0].cpu().item<int64_t>();
  torch::Tensor data =
      root ? torch::from_blob(bytes.data(), {n}, torch::kUInt8).clone() : torch::empty({n}, torch::kUInt8);
  std::vector<at::Tensor> payload{data.to(device)};
  if (n > 0) broadcast(payload);
  if (!root) {
    torch::Tensor cpu = payload[0].cpu();
    bytes.assign(static_cast<const char*>(cpu.data_ptr()), static_cast<const char*>(cpu.data_ptr()) + n);
  }
}

}  // namespace

void broadcast_bytes(const DistContext& ctx, std::vector<char>& bytes, int64_t root) {
  if (!ctx.distributed()) return;
  PhaseScope waiting(*ctx.activity, Phase::kCollective);
  c10d::BroadcastOptions from;
  from.rootRank = root;
  broadcast_bytes_with([&](std::vector<at::Tensor>& t) { ctx.group->broadcast(t, from)->wait(); }, ctx.rank == root,
                       ctx.device, bytes);
}

void broadcast_bytes(c10d::Backend& group, std::vector<char>& bytes) {
  broadcast_bytes_with([&](std::vector<at::Tensor>& t) { group.broadcast(t, c10d::BroadcastOptions{})->wait(); },
                       group.getRank() == 0, torch::kCPU, bytes);
}

}  // namespace ddp
