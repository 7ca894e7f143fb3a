// batch_norm_collectives: SyncBatchNorm's all_gather and all_reduce over the job's process group.
#include "train/batch_norm_sync.h"

#include "distributed/reduce.h"

namespace ddp {
namespace {

class GroupCollectives : public BatchNormCollectives {
 public:
  explicit GroupCollectives(DistContext ctx) : ctx_(std::move(ctx)) {}
  int64_t world_size() const override { return ctx_.world_size; }
  torch::Tensor all_gather(const torch::Tensor& t) override { return torch::stack(ddp::all_gather(ctx_, t)); }
  void all_reduce_sum(torch::Tensor& t) override { ddp::all_reduce_sum(ctx_, t); }

 private:
  DistContext ctx_;
};

}  // namespace

c10::intrusive_ptr<BatchNormCollectives> batch_norm_collectives(const DistContext& ctx) {
  return c10::make_intrusive<GroupCollectives>(ctx);
}

}  // namespace ddp
