// Trainer's training.cuda_graph step: warm-up, one capture of the whole step, replays; its non-finite flag read late.
#include "train/trainer.h"

#include "amp/grad_scaler.h"
#include "data/device_feed.h"
#include "base/capturable_step.h"
#include "checkpoint/checkpointer.h"
#include "distributed/gradient_sync.h"
#include "optim/gradients.h"
#include "train/captured_step.h"
#include "train/graph_state.h"

#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <utility>

namespace ddp {

Trainer::~Trainer() = default;

void Trainer::build_graph() {
  if (!cfg_.training.cuda_graph) return;
  if (ctx_.distributed() && ctx_.backend != "nccl")
    throw std::runtime_error(
        "training.cuda_graph captures DDP's all-reduce with NCCL only, and this job's backend is " + ctx_.backend);
  auto* capturable = dynamic_cast<CapturableStep*>(optimizer_.get());
  if (!capturable || !capturable->capturable())
    throw std::runtime_error("training.cuda_graph needs an optimizer that steps on the device (sgd, optimizer.fused)");
  // PyTorch's CUDA Graphs notes: at least 11 eager DDP iterations before capturing DDP; a few for one process. The
  // autocast cast cache must be off while capturing (cache_enabled=False); off for the whole run, so that every step
  // runs the same casts.
  graph_ = std::make_unique<GraphState>(ctx_.device, ctx_.distributed() ? 11 : 3);
  at::autocast::set_autocast_cache_enabled(false);
}

void Trainer::graph_step(const std::vector<Batch>& micro_batches, StepRecord& total) {
  GraphState& g = *graph_;
  const Batch& batch = micro_batches.front();
  const double lr = optimizer_->param_groups().front().options().get_lr();
  // Once captured, the optimizer reads its lr from g.lr in eager steps too (a partial last batch).
  if (g.lr.defined()) {
    torch::NoGradGuard no_grad;
    g.lr.fill_(lr);
  }
  const bool full = micro_batches.size() == 1 && batch.size() == cfg_.data.batch_size;
  // The capture records the update of an average that has one (the first update copies the weights instead).
  const bool warming = g.warmup_left > 0 || (ema_->enabled() && ema_->updates() == 0);
  if (!full || warming) {
    settle_graph_flag();                                 // a stop decided by a replay comes before any later step
    if (!full) return train_step(micro_batches, total);  // a partial last batch: the graph's shapes are fixed
    g.warmup_left = std::max<int64_t>(g.warmup_left - 1, 0);
    g.captured.warm_up([&] { train_step(micro_batches, total); });
    return;
  }
  RECORD_USER_SCOPE("ddptrain::step");
  const bool logged = reporter_.logs_at(total);
  const auto start = std::chrono::steady_clock::now();
  if (!g.captured.captured()) {
    torch::NoGradGuard no_grad;
    g.images = torch::empty_like(batch.images);
    g.labels = torch::empty_like(batch.labels);
    g.lr = torch::zeros({}, torch::dtype(torch::kFloat32).device(ctx_.device));
    g.loss_sum = torch::zeros({}, torch::dtype(torch::kFloat64).device(ctx_.device));
    g.correct = torch::zeros({}, torch::dtype(torch::kInt64).device(ctx_.device));
    g.flag_host = torch::zeros({1}, torch::dtype(torch::kFloat32).pinned_memory(true));
    dynamic_cast<CapturableStep&>(*optimizer_).read_lr_from(g.lr);
    figures_.track(g.loss_sum, g.correct);
  }
  {
    torch::NoGradGuard no_grad;
    g.images.copy_(batch.images, /*non_blocking=*/true);
    g.labels.copy_(batch.labels, /*non_blocking=*/true);
    g.lr.fill_(lr);  // a no-op but on the capture's step
  }
  const bool capturing = !g.captured.captured();
  if (capturing) {
    zero_grad(*optimizer_);  // backward then makes the gradients in the graph's memory pool
    g.captured.capture([&] {
      const MicroBatchResult r = forward_backward(Batch{g.images, g.labels, nullptr, {}}, /*sync=*/true, 1.0);
      const Update update = update_parameters(total, /*want_norm=*/true, /*losses=*/nullptr);
      g.norm = update.norm;
      g.flag = update.flag;
      torch::NoGradGuard no_grad;
      g.loss_sum.add_(r.loss, static_cast<double>(r.samples));
      g.correct.add_(r.correct);
    });
  }
  g.captured.replay();
  if (!capturing) ema_->count_replayed_update();  // the capture counted the first replay's
  total.samples += batch.size();
  total.time.compute = seconds_since(start);
  settle_graph_flag();  // the previous replay's, which has long finished
  if (g.flag.defined()) {
    c10::impl::VirtualGuardImpl guard(ctx_.device.type());
    g.flag_host.copy_(g.flag, /*non_blocking=*/true);
    g.flag_ready.record(guard.getStream(ctx_.device));
    g.flag_step = state_.global_step + 1;
  }
  // The step's figures are the graph's own; a logged step settles its flag first, so its record is complete.
  if (logged) settle_graph_flag();
  end_step(total, logged, logged ? g.norm : torch::Tensor());
}

void Trainer::settle_graph_flag() {
  if (!graph_ || graph_->flag_step == 0) return;
  GraphState& g = *graph_;
  const int64_t step = std::exchange(g.flag_step, 0);
  g.flag_ready.synchronize();
  if (g.flag_host.item<float>() == 0) {
    nonfinite_in_a_row_ = 0;
    return;
  }
  if (skip_nonfinite(step)) return;
  stop_nonfinite(step, "a replayed step: its loss and parameters are not read",
                 "its optimizer step was skipped on the device, and the run stopped there");
}

}  // namespace ddp
