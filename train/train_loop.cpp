// Trainer's loop: resume, epochs of steps, epoch-end evaluation and checkpoints, the run's end.
#include "train/trainer.h"

#include "amp/grad_scaler.h"
#include "base/exit_codes.h"
#include "base/first_line.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/final_outputs.h"
#include "checkpoint/hub_export.h"
#include "checkpoint/state_dict.h"
#include "data/device_feed.h"
#include "data/epoch_sampler.h"
#include "distributed/gradient_sync.h"
#include "distributed/rank_zero.h"
#include "optim/optimizer.h"
#include "train/preemption.h"

#include <limits>
#include <optional>
#include <utility>

namespace ddp {

void Trainer::resume() {
  // Before any step: no untrained model.pt, no late failure.
  check_training_batches(train_sampler()->num_samples(), "");
  const auto resumed =
      checkpointer_->resume([this](const c10::impl::GenericDict& state) { return check_state_dict(state); });
  if (resumed) {
    try {
      load_state_dict(resumed->state);
    } catch (const std::exception& e) {
      const std::string from = resumed->path.empty() ? std::string("rank 0's checkpoint") : resumed->path;
      throw std::runtime_error("resume from " + from + ": " + first_line(e.what()));
    }
  }
  const std::optional<int64_t> resumed_at = resumed ? std::optional<int64_t>(state_.global_step) : std::nullopt;
  reporter_.open_files(resumed_at);
  if (!resumed) return;
  checkpointer_->restored_at(state_.global_step);
  reporter_.message("resumed from " + resumed->path + " at step " + std::to_string(state_.global_step) + " (epoch " +
                    std::to_string(state_.position.epoch + 1) + ", micro-batch " +
                    std::to_string(state_.position.batch_in_epoch) + ")");
}

void Trainer::train() {
  epochs_ = epochs_to_train();
  total_steps_ = planned_steps(epochs_);
  if (cfg_.training.max_steps > 0) total_steps_ = std::min(total_steps_, cfg_.training.max_steps);
  dataset_.train.ensure_images();
  start_loader_threads();
  reporter_.start();
  PhaseScope loop(*ctx_.activity, Phase::kLoop);
  bool evaluated = false;  // the last finished epoch was evaluated
  while (state_.position.epoch < epochs_ && state_.global_step < total_steps_) {
    const EpochEnd end = train_epoch();
    if (end == EpochEnd::kPreempted) return preempted();
    if (end == EpochEnd::kCut) {  // training.max_steps: steps were trained since the last evaluation
      evaluated = false;
      break;
    }
    evaluated = end_epoch();
  }
  finish(evaluated);
}

Trainer::EpochEnd Trainer::train_epoch() {
  const int64_t k = cfg_.training.grad_accum_steps;
  EpochPosition& position = state_.position;
  const std::unique_ptr<EpochSampler> sampler = train_sampler(position.order_world);
  sampler->set_epoch(position.epoch);
  const EpochSamples samples = sampler->samples_from(position.sample_offset);
  const std::vector<int64_t>& indices = samples.indices;
  // An epoch resumed from a checkpoint of another world size or batch size is a different length.
  if (position.sample_offset != 0)
    check_training_batches(static_cast<int64_t>(indices.size()), " in epoch " + std::to_string(position.epoch + 1) +
                                                                     " resumed from sample " +
                                                                     std::to_string(position.sample_offset));
  const int64_t num_batches =
      batches_in(static_cast<int64_t>(indices.size()), cfg_.data.batch_size, cfg_.data.drop_last);
  DeviceFeed& feed = training_feed(samples);
  std::vector<Batch> group;
  double data_s = 0;  // the step's wait for its batches
  while (true) {
    if (group.empty() && state_.global_step < total_steps_) {
      profiler_->step_begins(state_.global_step + 1);
      ctx_.activity->set_step(state_.global_step + 1);
    }
    std::optional<Batch> batch;
    {
      PhaseScope phase(*ctx_.activity, Phase::kData, "ddptrain::data");  // waiting for the next batch
      const auto wait = std::chrono::steady_clock::now();
      batch = feed.next();
      data_s += seconds_since(wait);
    }
    if (!batch) break;
    group.push_back(std::move(*batch));
    ++position.batch_in_epoch;
    if (static_cast<int64_t>(group.size()) < k && position.batch_in_epoch < num_batches) continue;
    const double lr = scheduled_lr(cfg_.lr_scheduler, base_lr_, state_.global_step, total_steps_);
    set_lr(*optimizer_, lr);
    StepRecord s;
    place(s, num_batches);
    graph_ ? graph_step(group, s) : train_step(group, s);
    log_samples(indices, position.batch_in_epoch - static_cast<int64_t>(group.size()), position.batch_in_epoch);
    group.clear();
    s.lr = lr;
    s.time.data = std::exchange(data_s, 0.0);
    reporter_.step(s);  // collective at its log points
    if (const auto trace = profiler_->step_ended(state_.global_step)) traced(*trace);
    // A step that ends the epoch is saved after the epoch's evaluation (end_epoch), so a resume from it does not
    // evaluate that step again (TensorBoard would hold its eval point twice: purge starts after the step); the run's
    // last step after the final evaluation (finish), with its accuracy for checkpoint.keep_best.
    if (checkpointer_->due_at_step(state_.global_step) && !s.ends_epoch && state_.global_step < total_steps_)
      save_checkpoint(-1);
    if (stop_requested()) return EpochEnd::kPreempted;
    if (state_.global_step >= total_steps_) break;
  }
  reporter_.end_epoch();
  const bool cut = position.batch_in_epoch < num_batches;
  end_training_epoch(cut);
  return cut ? EpochEnd::kCut : EpochEnd::kFinished;
}

void Trainer::log_samples(const std::vector<int64_t>& epoch_samples, int64_t first_batch, int64_t end_batch) {
  const int64_t b = cfg_.data.batch_size, n = static_cast<int64_t>(epoch_samples.size());
  const int64_t begin = std::min(first_batch * b, n), end = std::min(end_batch * b, n);
  sample_log_->step(
      state_.global_step, state_.position.epoch + 1,
      c10::ArrayRef<int64_t>(epoch_samples).slice(static_cast<size_t>(begin), static_cast<size_t>(end - begin)));
}

void Trainer::place(StepRecord& s, int64_t num_batches) const {
  const int64_t k = cfg_.training.grad_accum_steps;
  const EpochPosition& position = state_.position;
  s.step = state_.global_step + 1;
  s.total_steps = total_steps_;
  s.epoch = position.epoch + 1;
  s.epochs = epochs_;
  s.step_in_epoch = (position.batch_in_epoch + k - 1) / k;
  s.steps_in_epoch = std::min((num_batches + k - 1) / k, s.step_in_epoch + total_steps_ - s.step);
  s.ends_epoch = position.batch_in_epoch == num_batches;
}

bool Trainer::end_epoch() {
  settle_graph_flag();
  state_.position.next_epoch();
  const int64_t every = cfg_.training.eval_every_epochs;
  const bool evaluate_now = every > 0 && state_.position.epoch % every == 0;
  last_eval_accuracy_ = -1;
  if (evaluate_now) evaluate_and_report("epoch " + std::to_string(state_.position.epoch));
  if (checkpointer_->due_at_epoch_end(state_.position.epoch, state_.global_step)) save_checkpoint(last_eval_accuracy_);
  return evaluate_now;
}

void Trainer::preempted() {
  save_checkpoint(-1);
  checkpointer_->settle();
  const bool requeue = stop_ == StopRequest::kRequeue;
  reporter_.message(
      std::string(requeue ? "stopped for requeue (SIGUSR1: a time limit ahead)" : "preempted by a signal") +
      " at step " + std::to_string(state_.global_step) + "; checkpoint in " + checkpointer_->dir() +
      "; run the same command again to resume (checkpoint.resume = \"auto\")" +
      (requeue ? "; exit " + std::to_string(kRequeueExitCode) : ""));
  // MLflow's run is KILLED, as mlflow.end_run(status="KILLED") leaves it; the resumed run sets it RUNNING again.
  reporter_.end_run(MlflowStatus::kKilled, false);
}

void Trainer::traced(const std::string& trace) {
  const int64_t first = cfg_.profile.start_step;
  reporter_.message("profile: steps " + std::to_string(first) + "-" +
                    std::to_string(std::min(state_.global_step, first + cfg_.profile.steps - 1)) + " traced into " +
                    trace +
                    (profiler_->memory_snapshot() ? ", memory snapshot into " + *profiler_->memory_snapshot() : "") +
                    " (each rank writes its own)");
}

void Trainer::finish(bool evaluated) {
  PhaseScope phase(*ctx_.activity, Phase::kFinish);
  settle_graph_flag();
  if (stop_vote_.pending()) stop_vote_.wait();  // the last step's vote, already in flight; nobody stops now
  if (const auto trace = profiler_->finish()) traced(*trace);
  if (profiler_->missed())
    reporter_.warning("profile.start_step = " + std::to_string(cfg_.profile.start_step) +
                      " is not among the steps this run trained (it ended at step " +
                      std::to_string(state_.global_step) + "): no trace written");
  dataset_.train.release_images();  // training is over: the final evaluation needs only the test split
  if (!evaluated) evaluate_and_report("(final)");
  if (const std::string saved = gradient_sync_->summary(); !saved.empty()) reporter_.message(saved);
  // The final state is a checkpoint too (a later run with more epochs or max_steps continues from it).
  if (checkpointer_->enabled() && !checkpointer_->holds(state_.global_step)) save_checkpoint(last_eval_accuracy_);
  checkpointer_->settle();  // the newest checkpoint is on disk before the run says it ended
  write_model();
  reporter_.end_run(MlflowStatus::kFinished, true);
}

void Trainer::write_model() {
  RunEnd end;
  end.steps = state_.global_step;
  end.epochs_done = state_.position.epoch;
  end.ended_by = ended_by();
  end.world_sizes = state_.world_sizes_text(state_.global_step);
  end.best_accuracy = state_.best_accuracy;
  end.skipped_steps = scaler_->skipped_steps();
  end.bad_samples = bad_samples();
  end.nonfinite_skips = nonfinite_skips();
  end.checkpoints_written = checkpointer_->written();
  end.model_path = cfg_.job.out_dir + "/" + FinalOutputs::kModel;
  const std::string summary = reporter_.summary(end);  // collective on CUDA
  const RankZeroOutcome r = on_rank_zero(ctx_, [&] {
    // One set of files: a full or read-only disk leaves the previous model.pt as it was.
    const NamedTensors weights = module_state(*model_);
    std::optional<NamedTensors> ema;
    if (ema_->enabled()) ema = module_state(ema_->model());
    write_final_outputs(cfg_.job.out_dir,
                        {weights, ema ? &*ema : nullptr, hub_config_json(cfg_, {dataset_.classes, model_->head_name()}),
                         [&](AtomicFileSet& files, const std::string& path) { model_->write_scripted(files, path); }});
    reporter_.message(summary);
  });
  if (!r.failed) return;
  throw std::runtime_error(ctx_.is_main() ? "writing the trained model failed: " + r.error +
                                                " (any previous model.pt is intact; the final checkpoint, if any, "
                                                "holds the trained state)"
                                          : "rank 0 failed to write the trained model");
}

void Trainer::save_checkpoint(double eval_accuracy) {
  settle_graph_flag();  // no checkpoint after a step whose stop is still on its way
  if (state_.global_step >= total_steps_ || stop_ != StopRequest::kNone) reporter_.settle_mlflow_run();
  PhaseScope phase(*ctx_.activity, Phase::kCheckpoint);
  const auto began = std::chrono::steady_clock::now();
  // state_dict: collective, called by save() once the save in flight is settled
  checkpointer_->save([this] { return state_dict(); }, state_.global_step, state_.position.epoch, eval_accuracy);
  reporter_.outside_steps(seconds_since(began));
}

bool Trainer::stop_requested() {
  // Every rank votes its own request; the vote's MAX is the job's: one rank's SIGUSR1 stops every rank for requeue.
  const auto local = static_cast<double>(stop_request());
  double agreed = local;
  if (ctx_.distributed()) {
    agreed = stop_vote_.pending() ? stop_vote_.wait() : 0.0;
    if (agreed == 0) stop_vote_.start(local);
  }
  stop_ = static_cast<StopRequest>(static_cast<int>(agreed));
  return stop_ != StopRequest::kNone;
}

int Trainer::exit_code() const { return stop_ == StopRequest::kRequeue ? kRequeueExitCode : 0; }

}  // namespace ddp
