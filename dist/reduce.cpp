// Collective helpers: all_reduce sums/max and barrier on the c10d process group.
#include "dist/reduce.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace ddp {

void all_reduce_sum(const DistContext& ctx, torch::Tensor& t) {
  if (!ctx.distributed()) return;
  std::vector<at::Tensor> tensors{t};
  ctx.group->allreduce(tensors, c10d::AllreduceOptions{})->wait();
}

std::vector<double> all_reduce_sum(const DistContext& ctx, const std::vector<double>& values) {
  if (!ctx.distributed()) return values;
  torch::Tensor t = torch::tensor(values, torch::kFloat64).to(ctx.device);
  all_reduce_sum(ctx, t);
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

double all_reduce_max(const DistContext& ctx, double value) {
  if (!ctx.distributed()) return value;
  std::vector<at::Tensor> tensors{torch::tensor({value}, torch::kFloat64).to(ctx.device)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  ctx.group->allreduce(tensors, opts)->wait();
  return tensors[0].cpu().item<double>();
}

void barrier(const DistContext& ctx) {
  if (!ctx.distributed()) return;
  ctx.group->barrier()->wait();
}

}  // namespace ddp
