// DistributedDataParallel on PyTorch's own engine (c10d::Reducer), driven as torch/nn/parallel/distributed.py does.
#pragma once

#include "config/config.h"
#include "distributed/c10d_fwd.h"
#include "distributed/context.h"
#include "distributed/gradient_sync.h"
#include "distributed/powersgd_hook.h"
#include "distributed/skip_zero_hook.h"

#include <torch/csrc/autograd/function.h>
#include <torch/nn/module.h>

#include <memory>
#include <utility>
#include <vector>

namespace ddp {

class DistributedDataParallel : public GradientSync {
 public:
  // Verifies parameter shapes across ranks, broadcasts parameters and buffers from rank 0
  // (broadcast_coalesced), and builds the Reducer: one bucket for the first iteration, then
  // bucket_cap_mb buckets (first 1 MiB) rebuilt in gradient-ready order after it.
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, const DistContext& ctx, const DistConfig& cfg);
  ~DistributedDataParallel() override;

  void begin_step(bool logged) override;
  // After a skipped step, PowerSGD's state starts over (powersgd_start_over): the step left inf/NaN in it.
  void step_done(const std::function<bool()>& skipped) override;
  void pre_forward(bool sync) override;
  void post_forward(bool sync, const torch::Tensor& output) override;
  void sync_buffers() override;
  std::optional<std::chrono::steady_clock::time_point> gradients_computed_at() const override;
  std::string summary() const override;
  std::optional<SyncFigures> sync_figures() const override;
  // "ddp_buckets": the rebuilt bucket layout (parameter indices per bucket, in reduction order), so that a resumed
  // run all-reduces in the buckets the uninterrupted one used from its second step on: an all-reduce's summation
  // order per element follows the layout (Gloo's and NCCL's rings), so another layout changes the last bits.
  void state_dict(c10::impl::GenericDict& out) override;
  // "powersgd": the PowerSGD hook's state (dist.grad_compression = "powersgd"), every rank's residuals.
  std::string load_state_dict(const c10::impl::GenericDict& state) override;

  c10d::Reducer& reducer();
  // Number of gradient buckets and their parameter counts (in reduction order).
  std::vector<size_t> bucket_sizes() const;
  bool buckets_rebuilt() const { return buckets_rebuilt_; }
  // What dist.skip_zero_gradients left out so far; none when it is off.
  std::optional<SkipZeroStats> skip_zero_stats() const;

 private:
  class Reducer;
  void rebuild_buckets();
  // find_unused_parameters' graph walk after each forward; static_graph finds them once instead (as DDP).
  bool searches_unused_parameters() const { return cfg_.find_unused_parameters && !cfg_.static_graph; }
  void watch_gradients();
  void gradient_computed(size_t index);
  void all_gradients_computed();

  std::shared_ptr<torch::nn::Module> module_;
  DistContext ctx_;
  DistConfig cfg_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> param_names_;  // params_' names in the module
  std::vector<torch::Tensor> buffers_;
  std::shared_ptr<Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
  SkipZeroGradientsHook* skip_zero_hook_ = nullptr;  // owned by the Reducer
  int64_t skip_zero_sent_before_ = 0;                // its elements sent before the last synchronising backward
  std::shared_ptr<PowerSgdState> powersgd_;          // dist.grad_compression = "powersgd": shared with its hook
  bool require_forward_param_sync_ = true;
  bool buckets_rebuilt_ = false;
  bool delay_all_reduce_queued_ = false;  // static_graph: the first backward's
  std::optional<std::chrono::steady_clock::time_point> gradients_computed_at_;
  // Each parameter's gradient accumulator with the key of the hook that counts it (run before the Reducer's).
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> gradient_hooks_;
  size_t gradients_pending_ = 0;  // of this synchronising backward
  std::vector<bool> computed_;    // which of params_' gradients the last synchronising backward computed
};

}  // namespace ddp
