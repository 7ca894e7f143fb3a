// batch_norm_collectives: SyncBatchNorm's all_gather and all_reduce over the job's process group.
#include "train/batch_norm_sync.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace ddp {
namespace {

class GroupCollectives : public BatchNormCollectives {
 public:
  explicit GroupCollectives(const DistContext& ctx) : group_(ctx.group), world_size_(ctx.world_size) {}

  int64_t world_size() const override { return world_size_; }

  torch::Tensor all_gather(const torch::Tensor& t) override {
    std::vector<at::Tensor> input{t.contiguous()};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int64_t r = 0; r < world_size_; ++r) output[0].push_back(torch::empty_like(input[0]));
    group_->allgather(output, input)->wait();
    return torch::stack(output[0]);
  }

  void all_reduce_sum(torch::Tensor& t) override {
    std::vector<at::Tensor> tensors{t};
    group_->allreduce(tensors)->wait();
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int64_t world_size_;
};

}  // namespace

c10::intrusive_ptr<BatchNormCollectives> batch_norm_collectives(const DistContext& ctx) {
  return c10::make_intrusive<GroupCollectives>(ctx);
}

}  // namespace ddp
