// Trainer's evaluation: the test split's loss and accuracy summed over ranks, the EMA's beside them, reported; a run
// that only evaluates.
#include "train/trainer.h"

#include "base/seconds_text.h"
#include "data/device_feed.h"
#include "data/distributed_sampler.h"
#include "data/shard_sampler.h"
#include "distributed/gradient_sync.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

EvalRecord Trainer::evaluate(Classifier* model) {
  Classifier& net = model ? *model : *model_;
  gradient_sync_->sync_buffers();
  net.eval();
  torch::NoGradGuard no_grad;
  dataset_.test.ensure_images();
  const Split& test = dataset_.test;
  BatchLoader loader(test,
                     test.shard_sizes.empty() ? eval_shard(test.size(), ctx_.world_size, ctx_.rank)
                                              : shard_eval_block(test.size(), ctx_.world_size, ctx_.rank),
                     loader_options(cfg_.data.eval_batch_size, /*drop_last=*/false));
  auto feed = make_device_feed(loader, ctx_.device);
  const bool top5 = cfg_.model.num_classes > 5;
  double loss_sum = 0;
  int64_t correct = 0, correct_top5 = 0, count = 0;
  while (auto batch = feed->next()) {
    torch::Tensor x = batch->images.to(ctx_.device), y = batch->labels.to(ctx_.device);
    torch::Tensor out = net.forward(x);
    torch::Tensor loss = net.outputs_log_probs() ? torch::nll_loss(out, y, {}, at::Reduction::Sum)
                                                 : torch::cross_entropy_loss(out, y, {}, at::Reduction::Sum);
    loss_sum += loss.item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
    if (top5) correct_top5 += std::get<1>(out.topk(5, 1)).eq(y.unsqueeze(1)).any(1).sum().item<int64_t>();
    count += batch->size();
  }
  if (&net == model_.get()) net.train();
  // Counts are summed as integers (exact); the loss as float64.
  const std::vector<int64_t> counts = all_reduce_sum_exact(ctx_, {correct, correct_top5, count});
  EvalRecord r;
  r.step = state_.global_step;
  r.epoch = state_.position.epoch;
  r.correct = counts[0];
  r.total = counts[2];
  r.loss = all_reduce_sum(ctx_, std::vector<double>{loss_sum})[0] / static_cast<double>(r.total);
  r.accuracy = static_cast<double>(r.correct) / static_cast<double>(r.total);
  if (top5) {
    r.correct_top5 = counts[1];
    r.accuracy_top5 = static_cast<double>(r.correct_top5) / static_cast<double>(r.total);
  }
  return r;
}

void Trainer::evaluate_and_report(const std::string& label) {
  PhaseScope phase(*ctx_.activity, Phase::kEval);
  const auto began = std::chrono::steady_clock::now();
  EvalRecord e = evaluate();
  if (ema_->enabled() && ema_->holds_weights()) {
    // Every rank averages its own BatchNorm statistics (as AveragedModel under DDP does); rank 0's average is the one
    // saved (model_ema.pt, checkpoints), so every rank evaluates rank 0's buffers: the accuracy reported is that
    // model's, whatever the world size.
    broadcast_from_rank0(ctx_, ema_->model().buffers());
    const EvalRecord averaged = evaluate(&ema_->model());
    e.loss_ema = averaged.loss;
    e.accuracy_ema = averaged.accuracy;
  }
  last_eval_accuracy_ = e.accuracy;
  state_.best_accuracy = std::max(state_.best_accuracy, e.accuracy);
  reporter_.eval(e, label);
  reporter_.outside_steps(seconds_since(began));
}

void Trainer::evaluate_only() {
  reporter_.open_files(std::nullopt, /*keep_records=*/true);  // job.out_dir may be the trained run's own
  reporter_.start();
  evaluate_and_report("(eval only)");
  barrier(ctx_);
  reporter_.end_run(MlflowStatus::kFinished, false);
}

}  // namespace ddp
