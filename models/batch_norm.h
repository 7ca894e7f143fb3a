// BatchNormLayers: how a built-in model's BatchNorm2d layers normalise in training: over this rank's batch, or over
// every rank's (torch.nn.SyncBatchNorm, model.sync_batchnorm).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/nn/modules/batchnorm.h>

namespace ddp {

// The two collectives SyncBatchNorm needs, over every rank of the job (the trainer makes them from its process
// group). A CustomClassHolder so that the autograd node of a forward can keep them for its backward.
class BatchNormCollectives : public torch::CustomClassHolder {
 public:
  virtual int64_t world_size() const = 0;
  // Every rank's `t` (same shape everywhere), as rows of a [world_size, t.numel()] tensor on t's device.
  virtual torch::Tensor all_gather(const torch::Tensor& t) = 0;
  virtual void all_reduce_sum(torch::Tensor& t) = 0;
};

// torch.nn.SyncBatchNorm's training forward for `bn`'s parameters and running statistics: mean and variance over
// every rank's samples (gathered per rank as mean, 1/std and count, combined as batch_norm_gather_stats_with_counts
// does), the same running statistics on every rank, and its backward (the sums of dy and dy * (x - mean) all-reduced
// before the input gradient; the weight and bias gradients stay local, for DDP to average). On CUDA through ATen's
// kernels, as PyTorch's; on the CPU, where ATen has none, through the same formulas in plain tensor operations.
torch::Tensor sync_batch_norm(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& input,
                              const c10::intrusive_ptr<BatchNormCollectives>& collectives);

// The BatchNorm2d layers in m's tree.
int64_t count_batchnorm_layers(const torch::nn::Module& m);

class BatchNormLayers {
 public:
  // bn's forward; with collectives set, in training and in a world of more than one, sync_batch_norm's (as
  // SyncBatchNorm.forward falls back to F.batch_norm in eval mode or alone).
  torch::Tensor forward(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& input) const;
  void synchronize(c10::intrusive_ptr<BatchNormCollectives> collectives) { collectives_ = std::move(collectives); }

 private:
  c10::intrusive_ptr<BatchNormCollectives> collectives_;
};

}  // namespace ddp
