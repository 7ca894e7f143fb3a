// Trainer's optimizer step: each micro-batch's forward and backward, the one update the eager and captured steps run,
// the step's end, and what a step with non-finite gradients does.
#include "train/trainer.h"

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "base/capturable_step.h"
#include "base/first_line.h"
#include "base/number_text.h"
#include "checkpoint/checkpointer.h"
#include "distributed/gradient_sync.h"
#include "optim/gradients.h"
#include "report/flop_counter.h"
#include "train/training_loss.h"

#include <ATen/record_function.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

Trainer::MicroBatchResult Trainer::forward_backward(const Batch& batch, bool sync, double loss_divisor,
                                                    int64_t micro_batch) {
  const auto start = std::chrono::steady_clock::now();
  model_->train();
  // The device feed delivers batches on the device already; a batch from elsewhere is moved there.
  const auto on_device = [this](const torch::Tensor& t) { return t.device() == ctx_.device ? t : t.to(ctx_.device); };
  const torch::Tensor y = on_device(batch.labels);
  // data.mixup_alpha / data.cutmix_alpha on the device (a no-op when both are 0), drawn for this micro-batch.
  const MixedBatch mixed = mix_.apply(on_device(batch.images), y,
                                      mix_key(static_cast<uint64_t>(cfg_.job.seed), state_.position.epoch,
                                              state_.global_step + 1, ctx_.rank, micro_batch));
  const torch::Tensor& x = mixed.images;
  gradient_sync_->pre_forward(sync);
  torch::Tensor out, loss;
  {
    PhaseScope phase(*ctx_.activity, Phase::kForward, "ddptrain::forward");
    {
      AutocastGuard autocast(ctx_.device, cfg_.amp.enabled, amp_dtype_);
      out = model_->forward(x);
    }
    gradient_sync_->post_forward(sync, out);
    out = out.to(torch::kFloat32);  // loss and its reduction in fp32
    loss = training_loss(out, y, mixed.targets, cfg_.training.label_smoothing, model_->outputs_log_probs());
  }
  {
    PhaseScope phase(*ctx_.activity, Phase::kBackward, "ddptrain::backward");  // with DDP's gradient all-reduce
    scaler_->scale(loss_divisor == 1 ? loss : loss / loss_divisor).backward();
  }
  // Host time: on CUDA, kernels run on after their launch and show where the host next waits for them.
  PhaseTimes time;
  time.compute = seconds_since(start);
  const auto computed = gradient_sync_->gradients_computed_at();
  if (sync && computed) {
    time.comm = seconds_since(*computed);
    time.compute -= time.comm;
  }
  return {loss.detach(), training_correct(out.detach(), y, mixed.targets), batch.size(), time};
}

void Trainer::train_step(const std::vector<Batch>& micro_batches, StepRecord& total) {
  // The profiler's view of one step (the batches' wait is not in it: the loop's ddptrain::data range).
  RECORD_USER_SCOPE("ddptrain::step");
  const bool logged = reporter_.logs_at(total);
  gradient_sync_->begin_step(logged);
  zero_grad(*optimizer_);  // set_to_none, as torch.optim's zero_grad()
  const size_t n = micro_batches.size();
  std::vector<std::pair<torch::Tensor, int64_t>> losses;  // each micro-batch's mean loss and size, for an error
  for (size_t i = 0; i < n; ++i) {
    // The run's first micro-batch is also counted: the model's FLOPs per sample.
    std::optional<FlopCounter> counter;
    if (!flops_counted_) counter.emplace();
    MicroBatchResult r =
        forward_backward(micro_batches[i], /*sync=*/i + 1 == n, static_cast<double>(n), static_cast<int64_t>(i));
    if (counter) {
      reporter_.set_flops_per_sample(static_cast<double>(counter->flops()) / static_cast<double>(r.samples));
      flops_counted_ = true;
    }
    total.time += r.time;
    total.samples += r.samples;
    figures_.add(r.loss, r.correct, r.samples);
    losses.emplace_back(r.loss, r.samples);
  }
  PhaseScope phase(*ctx_.activity, Phase::kOptimizer, "ddptrain::optimizer");  // unscale, norm, step, EMA
  const auto optimizer_start = std::chrono::steady_clock::now();
  const Update update = update_parameters(total, /*want_norm=*/logged, &losses);
  total.time.optimizer = seconds_since(optimizer_start);
  end_step(total, logged, update.norm);
}

Trainer::Update Trainer::update_parameters(const StepRecord& total, bool want_norm,
                                           const std::vector<std::pair<torch::Tensor, int64_t>>* losses) {
  torch::NoGradGuard no_grad;
  scaler_->unscale(*optimizer_);
  const std::vector<torch::Tensor> grads = defined_grads(model_->parameters());
  const double clip = cfg_.training.clip_grad_norm;
  Update update;
  update.norm = clip > 0 ? clip_grad_norm(grads, clip) : want_norm ? total_norm(grads) : torch::Tensor();
  if (!scaler_->enabled() && !losses) {
    update.flag = non_finite_(grads);
    dynamic_cast<CapturableStep&>(*optimizer_).step_unless_found_inf(update.flag);
  } else if (losses && skip_if_not_finite(grads, update.norm, *losses)) {
    zero_grad(*optimizer_);  // the same on every rank: the gradients are the all-reduced ones
    gradient_sync_->step_done([] { return true; });
    return update;
  } else {
    scaler_->step(*optimizer_);  // with a loss scaler, skipped where its found_inf says so
    // Before update() forgets found_inf. Only the eager step asks: a captured one (no `losses`) reads nothing on the
    // host and has no communication hook that carries state (training.cuda_graph refuses dist.grad_compression).
    if (losses) gradient_sync_->step_done([&] { return scaler_->found_inf(); });
    scaler_->update();
  }
  ema_->step_ended(*model_, total.step_in_epoch, total.step);  // AveragedModel.update_parameters on its steps
  return update;
}

void Trainer::end_step(StepRecord& total, bool logged, const torch::Tensor& norm) {
  const int64_t step = ++state_.global_step;
  const int64_t every = cfg_.dist.check_replicas_every;
  if (every > 0 && step % every == 0) check_replicas_identical(ctx_, model_->parameters(), step);
  if (logged) {  // the interval's figures, read from the device at once
    const StepFigures::Sums sums = figures_.read();
    total.loss_sum = sums.loss_sum;
    total.correct = sums.correct;
    if (norm.defined()) total.figures.set("grad_norm", norm.item<double>());
    total.figures.set("param_norm", total_norm(model_->parameters()).item<double>());
    total.skipped_steps = scaler_->skipped_steps();
    total.loss_scale = scaler_->get_scale();
    if (const auto sync = gradient_sync_->sync_figures()) {
      total.bytes_sent = sync->bytes_sent;
      total.compression_rate = sync->rate;
      total.residual_norm = sync->residual_norm;
    }
  }
  total.bad_samples = bad_samples();
  total.nonfinite_skips = nonfinite_skips();
}

int64_t Trainer::bad_samples() const { return dataset_.train.source ? dataset_.train.source->bad_samples() : -1; }

int64_t Trainer::nonfinite_skips() const {
  return cfg_.training.on_nonfinite == OnNonFinite::Skip ? nonfinite_skips_ : -1;
}

bool Trainer::skip_if_not_finite(const std::vector<torch::Tensor>& grads, const torch::Tensor& norm,
                                 const std::vector<std::pair<torch::Tensor, int64_t>>& losses) {
  // Inf/NaN gradients are a loss scaler's to handle (the step is skipped, the scale backs off).
  if (scaler_->enabled()) return false;
  // The step's one read of the device: the norm's finiteness where it was computed, else one pass over the gradients.
  const bool finite =
      norm.defined() ? static_cast<bool>(torch::isfinite(norm).item<bool>()) : non_finite_(grads).item<float>() == 0;
  if (finite) {
    nonfinite_in_a_row_ = 0;
    return false;
  }
  if (skip_nonfinite(state_.global_step + 1)) return true;
  std::string first;  // in backward order: the parameters from the output back to the input
  const auto named = model_->named_parameters();
  for (auto it = named.end(); it != named.begin();) {
    --it;
    const torch::Tensor& g = it->value().grad();
    if (g.defined() && !torch::isfinite(g).all().item<bool>()) {
      first = it->key();
      break;
    }
  }
  double loss_sum = 0;
  int64_t samples = 0;
  for (const auto& [loss, size] : losses) {
    loss_sum += loss.item<double>() * static_cast<double>(size);
    samples += size;
  }
  const double loss = loss_sum / static_cast<double>(std::max<int64_t>(samples, 1));
  stop_nonfinite(
      state_.global_step + 1,
      "loss " + (std::isnan(loss) ? std::string("nan") : shortest_number(loss)) +
          " on this rank; first in backward order: " + (first.empty() ? std::string("none of this rank's") : first),
      "stopped before the optimizer step");
}

bool Trainer::skip_nonfinite(int64_t step) {
  if (cfg_.training.on_nonfinite != OnNonFinite::Skip || nonfinite_in_a_row_ >= cfg_.training.max_nonfinite_skips)
    return false;
  ++nonfinite_in_a_row_;
  ++nonfinite_skips_;
  reporter_.warning("step " + std::to_string(step) + ": the gradients are not finite; step skipped on every rank (" +
                    std::to_string(nonfinite_in_a_row_) + " in a row, training.max_nonfinite_skips = " +
                    std::to_string(cfg_.training.max_nonfinite_skips) + ")");
  return true;
}

void Trainer::stop_nonfinite(int64_t step, const std::string& detail, const std::string& stopped) {
  const bool skipping = cfg_.training.on_nonfinite == OnNonFinite::Skip;
  // Every rank stops here together: the save in flight is settled, so the newest checkpoint named is on disk.
  std::string unsettled;
  try {
    checkpointer_->settle();
  } catch (const std::exception& e) {
    unsettled = " (" + first_line(e.what()) + ")";
  }
  const std::string& last = checkpointer_->last_written();
  throw std::runtime_error(
      "step " + std::to_string(step) + ": the gradients are not finite (" + detail + ")" +
      (skipping ? "; " + std::to_string(nonfinite_in_a_row_) + " steps before it were skipped in a row" : "") + "; " +
      stopped + "; newest checkpoint: " + (last.empty() ? std::string("none written by this run") : last) + unsettled);
}

}  // namespace ddp
