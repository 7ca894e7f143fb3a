// Trainer's loop: resume, epochs of steps, step and eval reports, epoch-end evaluation and checkpoints, the run's end.
#include "train/trainer.h"

#include "amp/grad_scaler.h"
#include "base/first_line.h"
#include "checkpoint/checkpoint_entries.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/state_dict.h"
#include "data/device_feed.h"
#include "data/distributed_sampler.h"
#include "distributed/rank_zero.h"
#include "memory/step_allocator.h"
#include "optim/optimizer.h"
#include "train/preemption.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace ddp {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void Trainer::resume() {
  check_training_batches(train_sampler().num_samples(), "");  // before any step: no untrained model.pt, no late failure
  const auto resumed = checkpointer_->resume([this](const c10::impl::GenericDict& state) -> std::string {
    try {
      ckpt_check_position(state, dataset_.train.size());
    } catch (const std::exception& e) {
      return first_line(e.what());
    }
    return "";
  });
  if (ctx_.is_main()) metrics_ = MetricsSink(cfg_.job.out_dir, /*append=*/resumed.has_value(), cfg_.metrics.tensorboard);
  if (!resumed) return;
  try {
    load_state_dict(resumed->state);
  } catch (const std::exception& e) {
    const std::string from = resumed->path.empty() ? std::string("rank 0's checkpoint") : resumed->path;
    throw std::runtime_error("resume from " + from + ": " + first_line(e.what()));
  }
  metrics_.purge_from(global_step_ + 1);  // the points the interrupted run logged after this checkpoint
  checkpointer_->restored_at(global_step_);
  log("resumed from " + resumed->path + " at step " + std::to_string(global_step_) + " (epoch " +
      std::to_string(position_.epoch + 1) + ", micro-batch " + std::to_string(position_.batch_in_epoch) + ")");
}

TrainSummary Trainer::train() {
  EpochRun run;
  run.start = run.interval_start = Clock::now();
  run.epochs = cfg_.training.epochs;
  if (__builtin_mul_overflow(run.epochs, steps_per_epoch(), &run.total_steps))
    run.total_steps = std::numeric_limits<int64_t>::max();
  if (cfg_.training.max_steps > 0) run.total_steps = std::min(run.total_steps, cfg_.training.max_steps);
  dataset_.train.ensure_images();
  TrainSummary summary;
  summary.best_accuracy = best_accuracy_;
  bool evaluated = false;  // the last finished epoch was evaluated
  while (position_.epoch < run.epochs && global_step_ < run.total_steps) {
    const EpochEnd end = train_epoch(run);
    if (end == EpochEnd::kPreempted) return preempted(run, summary);
    if (end == EpochEnd::kCut) break;
    end_epoch(run, summary, evaluated);
  }
  finish(run, summary, evaluated);
  return summary;
}

Trainer::EpochEnd Trainer::train_epoch(EpochRun& run) {
  const int64_t k = cfg_.training.grad_accum_steps;
  DistributedSampler sampler = train_sampler();
  sampler.set_epoch(position_.epoch);
  std::vector<int64_t> indices = sampler.indices_from(position_.sample_offset);
  // An epoch resumed from a checkpoint of another world size or batch size is a different length.
  if (position_.sample_offset != 0)
    check_training_batches(static_cast<int64_t>(indices.size()),
                           " in epoch " + std::to_string(position_.epoch + 1) + " resumed from sample " +
                               std::to_string(position_.sample_offset));
  BatchLoader loader(dataset_.train, std::move(indices), loader_options(cfg_.data.batch_size, cfg_.data.drop_last),
                     position_.batch_in_epoch);
  const int64_t num_batches = loader.num_batches();
  auto feed = make_device_feed(loader, ctx_.device);
  std::vector<Batch> group;
  while (auto batch = feed->next()) {
    group.push_back(std::move(*batch));
    ++position_.batch_in_epoch;
    if (static_cast<int64_t>(group.size()) < k && position_.batch_in_epoch < num_batches) continue;
    const double lr = scheduled_lr(cfg_.lr_scheduler, base_lr_, global_step_, run.total_steps);
    set_lr(*optimizer_, lr);
    const StepStats s = train_step(group);
    group.clear();
    report_step(run, s, lr, num_batches);
    // A step that ends the epoch is saved after the epoch's evaluation (end_epoch), so a resume from it does not
    // evaluate that step again (TensorBoard would hold its eval point twice: purge starts after the step).
    if (checkpointer_->due_at_step(global_step_) && position_.batch_in_epoch < num_batches) save_checkpoint(-1);
    if (stop_requested()) return EpochEnd::kPreempted;
    if (global_step_ >= run.total_steps) break;
  }
  progress_.end_epoch();
  return position_.batch_in_epoch < num_batches ? EpochEnd::kCut : EpochEnd::kFinished;
}

ProgressSnapshot Trainer::snapshot(const EpochRun& run, double lr, int64_t num_batches) const {
  const int64_t k = cfg_.training.grad_accum_steps;
  ProgressSnapshot p;  // loss, accuracy and samples/s: not reported (NaN)
  p.epoch = position_.epoch + 1;
  p.epochs = run.epochs;
  p.step_in_epoch = (position_.batch_in_epoch + k - 1) / k;
  p.steps_in_epoch = std::min((num_batches + k - 1) / k, p.step_in_epoch + run.total_steps - global_step_);
  p.global_step = global_step_;
  p.total_steps = run.total_steps;
  p.lr = lr;
  p.loss_scale = scaler_->get_scale();
  return p;
}

void Trainer::report_step(EpochRun& run, const StepStats& s, double lr, int64_t num_batches) {
  progress_.on_step(snapshot(run, lr, num_batches));
  run.interval_loss += s.loss_sum;
  run.interval_correct += static_cast<double>(s.correct);
  run.interval_samples += static_cast<double>(s.samples);
  const bool last = global_step_ >= run.total_steps;
  if (global_step_ % cfg_.metrics.log_every_steps != 0 && !last && position_.batch_in_epoch != num_batches) return;
  const std::vector<double> r = all_reduce_sum(ctx_, {run.interval_loss, run.interval_correct, run.interval_samples});
  TrainPoint p;
  p.step = global_step_;
  p.epoch = position_.epoch + 1;
  p.loss = r[0] / r[2];
  p.accuracy = r[1] / r[2];
  p.lr = lr;
  p.samples_per_s = r[2] / std::max(seconds_since(run.interval_start), 1e-9);
  p.samples = static_cast<int64_t>(r[2]);
  p.loss_scale = scaler_->get_scale();
  p.skipped_steps = scaler_->skipped_steps();
  p.grad_norm = s.grad_norm;
  p.gpu_mem_peak_mib = gpu_mem_peak_mib();  // collective on CUDA
  p.wall_s = seconds_since(run.start);
  run.total_samples += r[2];
  metrics_.train(p);
  ProgressSnapshot shown = snapshot(run, lr, num_batches);
  shown.loss = p.loss;
  shown.accuracy = p.accuracy;
  shown.samples_per_s = p.samples_per_s;
  progress_.on_log(shown);
  run.interval_loss = run.interval_correct = run.interval_samples = 0;
  run.interval_start = Clock::now();
}

void Trainer::end_epoch(EpochRun& run, TrainSummary& summary, bool& evaluated) {
  position_.next_epoch();
  const int64_t every = cfg_.training.eval_every_epochs;
  evaluated = every > 0 && position_.epoch % every == 0;
  double accuracy = -1;
  if (evaluated) {
    summary.final_eval = evaluate();
    accuracy = summary.final_eval.accuracy;
    best_accuracy_ = std::max(best_accuracy_, accuracy);
    report_eval(summary.final_eval, position_.epoch, seconds_since(run.start),
                "epoch " + std::to_string(position_.epoch));
  }
  if (checkpointer_->due_at_epoch_end(position_.epoch, global_step_)) save_checkpoint(accuracy);
}

void Trainer::report_eval(const EvalResult& e, int64_t epoch, double wall_s, const std::string& label) {
  EvalPoint p;
  p.step = global_step_;
  p.epoch = epoch;
  p.loss = e.loss;
  p.accuracy = e.accuracy;
  p.correct = e.correct;
  p.total = e.total;
  p.correct_top5 = e.correct_top5;
  p.accuracy_top5 = e.accuracy_top5;
  p.wall_s = wall_s;
  metrics_.eval(p);
  log(eval_text(e, label));
}

TrainSummary Trainer::preempted(const EpochRun& run, TrainSummary summary) {
  save_checkpoint(-1);
  summary.preempted = true;
  log("preempted by signal " + std::to_string(preemption_signal()) + " at step " + std::to_string(global_step_) +
      "; checkpoint in " + checkpointer_->dir() +
      "; run the same command again to resume (checkpoint.resume = \"auto\")");
  summary.steps = global_step_;
  summary.wall_s = seconds_since(run.start);
  return summary;
}

void Trainer::finish(EpochRun& run, TrainSummary& summary, bool evaluated) {
  if (stop_vote_.pending()) stop_vote_.wait();  // the last step's vote, already in flight; nobody stops now
  dataset_.train.release_images();                // training is over: the final evaluation needs only the test split
  if (!evaluated) {
    summary.final_eval = evaluate();
    best_accuracy_ = std::max(best_accuracy_, summary.final_eval.accuracy);
    report_eval(summary.final_eval, position_.epoch, seconds_since(run.start), "(final)");
  }
  // The final state is a checkpoint too (a later run with more epochs or max_steps continues from it).
  if (checkpointer_->enabled() && !checkpointer_->holds(global_step_)) save_checkpoint(summary.final_eval.accuracy);
  summary.best_accuracy = best_accuracy_;
  summary.steps = global_step_;
  summary.epochs = position_.epoch;
  summary.wall_s = seconds_since(run.start);
  summary.samples_per_s = run.total_samples / std::max(summary.wall_s, 1e-9);
  summary.skipped_steps = scaler_->skipped_steps();
  summary.gpu_mem_peak_mib = gpu_mem_peak_mib().value_or(-1);
  summary.checkpoints_written = checkpointer_->written();
  if (step_memory_) {
    const StepAllocator::Stats m = step_memory_->stats();
    char planned[64];
    std::snprintf(planned, sizeof planned, "planned block %.1f MiB, ", static_cast<double>(m.plan_bytes) / (1 << 20));
    summary.step_memory = m.plan_bytes > 0 ? planned + std::to_string(m.planned_steps) + " of " +
                                                 std::to_string(m.steps) + " steps from it"
                                           : "no plan (fewer than " + std::to_string(StepAllocator::kRecordedStep) +
                                                 " steps)";
  }
  write_model(summary);
}

void Trainer::write_model(TrainSummary& summary) {
  summary.model_path = cfg_.job.out_dir + "/model.pt";
  const RankZeroOutcome r = on_rank_zero(ctx_, [&] {
    // Atomic: a full or read-only disk leaves the previous model.pt as it was.
    save_state_dict(summary.model_path, module_state(*model_));
    log(summary_text(summary));
  });
  if (!r.failed) return;
  throw std::runtime_error(ctx_.is_main() ? "writing the trained model failed: " + r.error +
                                                " (any previous model.pt is intact; the final checkpoint, if any, "
                                                "holds the trained state)"
                                          : "rank 0 failed to write the trained model");
}

void Trainer::save_checkpoint(double eval_accuracy) {
  checkpointer_->save(state_dict(), global_step_, position_.epoch, eval_accuracy);  // state_dict: collective
}

EvalResult Trainer::evaluate_only() {
  if (ctx_.is_main()) metrics_ = MetricsSink(cfg_.job.out_dir, /*append=*/false, cfg_.metrics.tensorboard);
  const auto start = Clock::now();
  EvalResult e = evaluate();
  report_eval(e, 0, seconds_since(start), "(eval only)");
  barrier(ctx_);
  return e;
}

bool Trainer::stop_requested() {
  const double local = preemption_signal() != 0 ? 1.0 : 0.0;
  if (!ctx_.distributed()) return local > 0;
  const bool stop = stop_vote_.pending() && stop_vote_.wait() > 0;
  if (!stop) stop_vote_.start(local);
  return stop;
}

}  // namespace ddp
