// Trainer: data, model, optimizer and DDP set-up; forward/backward, optimizer steps, epochs, evaluation, model.pt.
#include "train/trainer.h"

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "config/config.h"
#include "train/device_settings.h"
#include "train/init_weights.h"
#include "train/preemption.h"
#include "report/tensorboard.h"
#include "checkpoint/state_dict.h"
#include "data/device_feed.h"
#include "distributed/ddp.h"
#include "base/first_line.h"
#include "data/distributed_sampler.h"
#include "distributed/reduce.h"
#include "memory/gpu_memory.h"
#include "memory/step_allocator.h"
#include "optim/optimizer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

Trainer::Trainer(Config cfg, DistContext ctx) : cfg_(std::move(cfg)), ctx_(std::move(ctx)) {}
Trainer::~Trainer() = default;

void Trainer::log(const std::string& line) const {
  const_cast<Progress&>(progress_).message(line);
}

void Trainer::write_metrics(const JsonRecord& r) {
  if (ctx_.is_main()) metrics_.write(r);
}

LoaderOptions Trainer::loader_options(int64_t batch_size, bool drop_last) const {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.drop_last = drop_last;
  o.workers = cfg_.data.workers;
  o.prefetch = cfg_.data.prefetch;
  o.mean = cfg_.data.mean;
  o.std = cfg_.data.std;
  // Page-locked host batches make the device copy asynchronous (DataLoader's pin_memory=True).
  if (ctx_.device.is_cuda() && cfg_.data.pin_memory) o.finish = pin_batch_memory();
  return o;
}

void Trainer::setup() {
  if (cfg_.job.step_memory == "planned") step_memory_ = &StepAllocator::start_run();  // before the first tensor
  if (cfg_.job.threads > 0) torch::set_num_threads(static_cast<int>(cfg_.job.threads));
  configure_math_modes(cfg_.training);  // before the first CUDA operation (cuBLAS reads its workspace setting)
  progress_ = Progress(cfg_.metrics.progress, ctx_.is_main());
  dataset_ = load_dataset(cfg_.data, cfg_.model, cfg_.job.seed);

  torch::manual_seed(static_cast<uint64_t>(cfg_.job.seed));
  ModelConfig model_cfg = cfg_.model;
  // On CUDA, "auto" is channels_last for every model: cuDNN's tensor-core convolutions run NHWC.
  if (model_cfg.memory_format == "auto" && ctx_.device.is_cuda()) model_cfg.memory_format = "channels_last";
  try {
    model_ = make_model(model_cfg);
  } catch (const c10::Error& e) {  // the allocator's message names bytes, not the keys that asked for them
    if (std::string(e.what()).find("can't allocate memory") == std::string::npos) throw;
    throw std::runtime_error("model.name = \"" + cfg_.model.name + "\" with model.num_classes = " +
                             std::to_string(cfg_.model.num_classes) + " and model.in_channels = " +
                             std::to_string(cfg_.model.in_channels) + " does not fit in memory: " +
                             first_line(e.what()));
  }
  if (!cfg_.model.init_from.empty())
    init_from_note_ = load_init_weights(*model_, cfg_.model, cfg_.model.init_from);
  model_->to(ctx_.device);
  if (ctx_.distributed()) ddp_ = std::make_unique<DistributedDataParallel>(model_, ctx_, cfg_.dist);
  // Dropout draws from the global generator: a distinct, reproducible stream per rank.
  torch::manual_seed(static_cast<uint64_t>(cfg_.job.seed) + static_cast<uint64_t>(ctx_.rank));

  if (cfg_.amp.enabled) amp_dtype_ = amp_dtype_from_name(cfg_.amp.dtype, ctx_.device.type());
  // auto: float16's narrow range needs loss scaling (torch.amp.GradScaler), bfloat16's does not.
  const bool scaling = cfg_.amp.enabled && (cfg_.amp.loss_scaling == "dynamic" ||
                                            (cfg_.amp.loss_scaling == "auto" && amp_dtype_ == c10::kHalf));
  if (scaling) {
    GradScalerOptions o;
    o.init_scale = cfg_.amp.init_scale;
    o.growth_factor = cfg_.amp.growth_factor;
    o.backoff_factor = cfg_.amp.backoff_factor;
    o.growth_interval = cfg_.amp.growth_interval;
    // Every rank must skip the same steps: found_inf is all-reduced (MAX) before it decides.
    o.reduce_found_inf = [this](double v) { return all_reduce_max(ctx_, v); };
    scaler_ = std::make_unique<GradScaler>(o);
  }

  base_lr_ = cfg_.optimizer.lr * (cfg_.optimizer.scale_lr == "linear" ? static_cast<double>(ctx_.world_size) : 1.0);
  optimizer_ = make_optimizer(cfg_.optimizer, base_lr_, model_->parameters());

}

void Trainer::open_metrics(bool append) {
  if (!ctx_.is_main() || metrics_.is_open()) return;
  std::filesystem::create_directories(cfg_.job.out_dir);
  const std::string path = cfg_.job.out_dir + "/metrics.jsonl";
  if (!append) std::filesystem::remove(path);
  metrics_ = JsonlWriter(path);
  if (cfg_.metrics.tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(cfg_.job.out_dir + "/tensorboard");
}

int64_t Trainer::steps_per_epoch() const {
  DistributedSampler sampler(dataset_.train.size(), ctx_.world_size, ctx_.rank, cfg_.data.shuffle,
                             static_cast<uint64_t>(cfg_.job.seed), cfg_.data.drop_last);
  const int64_t n = sampler.num_samples(), b = cfg_.data.batch_size;
  // Quotients rounded up without n + b - 1, which overflows for a batch_size near 2^63.
  const int64_t batches = n / b + (!cfg_.data.drop_last && n % b != 0 ? 1 : 0);
  const int64_t k = cfg_.training.grad_accum_steps;
  return batches / k + (batches % k != 0 ? 1 : 0);
}

void Trainer::check_training_batches(int64_t samples_per_rank, const std::string& where) const {
  const int64_t n = samples_per_rank, b = cfg_.data.batch_size;
  const std::string split = std::to_string(dataset_.train.size()) + " training samples over " +
                            std::to_string(ctx_.world_size) + " rank(s) = " + std::to_string(n) + " per rank" + where;
  const bool no_batch = n == 0 || (cfg_.data.drop_last && n < b);
  if (no_batch && !where.empty()) return;  // a resumed epoch with nothing left: the next one is whole
  if (no_batch)
    throw ConfigError("no optimizer steps to take: " + split + ", and data.drop_last = " +
                      (cfg_.data.drop_last ? "true drops a batch smaller than" : "false with") +
                      " data.batch_size = " + std::to_string(b) +
                      "; lower data.batch_size, set data.drop_last = false or use more data");
  // The smallest batch a rank trains on: a partial last one unless dropped, else full ones.
  const int64_t partial = n % b;
  const int64_t smallest = (partial != 0 && !cfg_.data.drop_last) ? partial : b;
  const int64_t needed = model_->min_training_batch(dataset_.image_size);
  if (smallest >= needed) return;
  throw ConfigError("data.batch_size = " + std::to_string(b) + " leaves a training batch of " +
                    std::to_string(smallest) + " sample(s) on each rank (" + split + "), but " + cfg_.model.name +
                    "'s BatchNorm needs at least " + std::to_string(needed) + " samples per batch on " +
                    std::to_string(dataset_.image_size) + "x" + std::to_string(dataset_.image_size) +
                    " images; set data.drop_last = true or a data.batch_size that leaves no batch of " +
                    std::to_string(smallest));
}

StepStats Trainer::forward_backward(const Batch& batch, bool sync, double loss_divisor) {
  model_->train();
  torch::Tensor x = batch.images.to(ctx_.device), y = batch.labels.to(ctx_.device);
  if (ddp_) ddp_->pre_forward(sync);
  torch::Tensor out;
  {
    AutocastGuard autocast(ctx_.device, cfg_.amp.enabled, amp_dtype_);
    out = model_->forward(x);
  }
  if (ddp_) ddp_->post_forward(sync, out);
  out = out.to(torch::kFloat32);  // loss and its reduction in fp32
  torch::Tensor loss = model_->outputs_log_probs() ? torch::nll_loss(out, y) : torch::cross_entropy_loss(out, y);
  torch::Tensor scaled = loss / loss_divisor;
  (scaler_ ? scaler_->scale(scaled) : scaled).backward();
  StepStats s;
  s.samples = batch.size();
  s.loss_sum = loss.item<double>() * static_cast<double>(s.samples);
  s.correct = out.detach().argmax(1).eq(y).sum().item<int64_t>();
  return s;
}

StepStats Trainer::train_step(const std::vector<Batch>& micro_batches) {
  struct StepBracket {  // the step's tensors are gone before end_step (it is destroyed last)
    StepAllocator* a;
    explicit StepBracket(StepAllocator* allocator) : a(allocator) {
      if (a) a->begin_step();
    }
    ~StepBracket() {
      if (a) a->end_step();
    }
  } bracket(step_memory_);
  zero_grad_in_place(*optimizer_);  // dist/ddp.h
  StepStats total;
  const size_t n = micro_batches.size();
  for (size_t i = 0; i < n; ++i) {
    StepStats s = forward_backward(micro_batches[i], /*sync=*/i + 1 == n, static_cast<double>(n));
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.samples += s.samples;
  }
  // The pre-clip global L2 norm of the true (unscaled) gradients, every step; clipped as
  // torch.nn.utils.clip_grad_norm_ does when training.clip_grad_norm > 0.
  if (scaler_) scaler_->unscale(*optimizer_);
  const double clip = cfg_.training.clip_grad_norm;
  if (clip > 0) {
    total.grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), clip);
  } else {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> norms;
    for (const auto& p : model_->parameters())
      if (p.grad().defined()) norms.push_back(p.grad().norm(2));
    total.grad_norm = norms.empty() ? 0.0 : torch::stack(norms).norm(2).item<double>();
  }
  if (scaler_) {
    total.skipped = !scaler_->step(*optimizer_);
    scaler_->update();
  } else {
    optimizer_->step();
  }
  ++global_step_;
  const int64_t every = cfg_.dist.check_replicas_every;
  if (every > 0 && global_step_ % every == 0) check_replicas_identical(ctx_, model_->parameters(), global_step_);
  return total;
}

std::optional<double> Trainer::gpu_mem_peak_mib() {
  const auto peak = peak_gpu_memory_bytes(ctx_.device);
  if (!peak) return std::nullopt;  // the same on every rank: all run on CPU or all on CUDA
  return all_reduce_max(ctx_, static_cast<double>(*peak)) / (1 << 20);
}

void Trainer::add_device_metrics(JsonRecord& record) {
  const auto mib = gpu_mem_peak_mib();
  if (!mib) return;
  record.add("gpu_mem_peak_mib", *mib);
  if (tensorboard_) tensorboard_->add_scalar("perf/gpu_mem_peak_mib", *mib, global_step_);
}

void Trainer::report_eval(const EvalResult& e, int64_t epoch, double wall_s, const std::string& label) {
  const bool top5 = e.correct_top5 >= 0;
  JsonRecord record;
  record.add("kind", "eval")
      .add("step", global_step_)
      .add("epoch", epoch)
      .add("loss", e.loss)
      .add("accuracy", e.accuracy)
      .add("correct", e.correct);
  if (top5) record.add("accuracy_top5", e.accuracy_top5).add("correct_top5", e.correct_top5);
  write_metrics(record.add("total", e.total).add("wall_s", wall_s));
  if (tensorboard_) {
    tensorboard_->add_scalar("eval/loss", e.loss, global_step_);
    tensorboard_->add_scalar("eval/accuracy", e.accuracy, global_step_);
    if (top5) tensorboard_->add_scalar("eval/accuracy_top5", e.accuracy_top5, global_step_);
  }
  const std::string top5_text = top5 ? " top-5 " + fmt("%.4f", e.accuracy_top5) + " (" +
                                           std::to_string(e.correct_top5) + "/" + std::to_string(e.total) + ")"
                                     : "";
  log("eval " + label + ": loss " + fmt("%.4f", e.loss) + " accuracy " + fmt("%.4f", e.accuracy) + " (" +
      std::to_string(e.correct) + "/" + std::to_string(e.total) + ")" + top5_text);
}

EvalResult Trainer::evaluate() {
  if (ddp_) ddp_->sync_buffers();
  model_->eval();
  torch::NoGradGuard no_grad;
  dataset_.test.ensure_images();
  const Split& test = dataset_.test;
  BatchLoader loader(test, eval_shard(test.size(), ctx_.world_size, ctx_.rank),
                     loader_options(cfg_.data.eval_batch_size, /*drop_last=*/false));
  auto feed = make_device_feed(loader, ctx_.device);
  const bool top5 = cfg_.model.num_classes > 5;
  double loss_sum = 0;
  int64_t correct = 0, correct_top5 = 0, count = 0;
  while (auto batch = feed->next()) {
    torch::Tensor x = batch->images.to(ctx_.device), y = batch->labels.to(ctx_.device);
    torch::Tensor out = model_->forward(x);
    torch::Tensor loss = model_->outputs_log_probs()
                             ? torch::nll_loss(out, y, {}, at::Reduction::Sum)
                             : torch::cross_entropy_loss(out, y, {}, at::Reduction::Sum);
    loss_sum += loss.item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
    if (top5) correct_top5 += std::get<1>(out.topk(5, 1)).eq(y.unsqueeze(1)).any(1).sum().item<int64_t>();
    count += batch->size();
  }
  model_->train();
  // Counts are summed as integers (exact); the loss as float64.
  const std::vector<int64_t> counts = all_reduce_sum_exact(ctx_, {correct, correct_top5, count});
  EvalResult r;
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

TrainSummary Trainer::train() {
  TrainSummary summary;
  const auto start = Clock::now();
  const int64_t epochs = cfg_.training.epochs, k = cfg_.training.grad_accum_steps;
  DistributedSampler sampler(dataset_.train.size(), ctx_.world_size, ctx_.rank, cfg_.data.shuffle,
                             static_cast<uint64_t>(cfg_.job.seed), cfg_.data.drop_last);
  check_training_batches(sampler.num_samples(), "");  // before any step: no untrained model.pt, no late failure
  const int64_t per_epoch = steps_per_epoch();
  int64_t total_steps = 0;
  if (__builtin_mul_overflow(epochs, per_epoch, &total_steps)) total_steps = std::numeric_limits<int64_t>::max();
  if (cfg_.training.max_steps > 0) total_steps = std::min(total_steps, cfg_.training.max_steps);
  resume();
  dataset_.train.ensure_images();
  summary.best_accuracy = best_accuracy_;

  double interval_loss = 0, interval_correct = 0, interval_samples = 0, total_samples = 0;
  auto interval_start = Clock::now();
  bool evaluated_last = false, done = global_step_ >= total_steps;
  while (epoch_ < epochs && !done) {
    const int64_t epoch = epoch_;
    sampler.set_epoch(epoch);
    std::vector<int64_t> indices = sampler.indices_from(epoch_sample_offset_);
    // An epoch resumed from a checkpoint of another world size or batch size is a different length.
    if (epoch_sample_offset_ != 0)
      check_training_batches(static_cast<int64_t>(indices.size()),
                             " in epoch " + std::to_string(epoch + 1) + " resumed from sample " +
                                 std::to_string(epoch_sample_offset_));
    BatchLoader loader(dataset_.train, std::move(indices), loader_options(cfg_.data.batch_size, cfg_.data.drop_last),
                       batch_in_epoch_);
    const int64_t num_batches = loader.num_batches();
    auto feed = make_device_feed(loader, ctx_.device);
    std::vector<Batch> group;
    while (auto batch = feed->next()) {
      group.push_back(std::move(*batch));
      ++batch_in_epoch_;
      if (static_cast<int64_t>(group.size()) < k && batch_in_epoch_ < num_batches) continue;
      const double lr = scheduled_lr(cfg_.lr_scheduler, base_lr_, global_step_, total_steps);
      set_lr(*optimizer_, lr);
      StepStats s = train_step(group);
      group.clear();
      auto snapshot = [&](double loss, double accuracy, double sps) {
        ProgressSnapshot p;
        p.epoch = epoch + 1;
        p.epochs = epochs;
        p.step_in_epoch = (batch_in_epoch_ + k - 1) / k;
        p.steps_in_epoch = std::min((num_batches + k - 1) / k, p.step_in_epoch + total_steps - global_step_);
        p.global_step = global_step_;
        p.total_steps = total_steps;
        p.loss = loss;
        p.accuracy = accuracy;
        p.lr = lr;
        p.loss_scale = scaler_ ? scaler_->get_scale() : 1.0;
        p.samples_per_s = sps;
        return p;
      };
      progress_.on_step(snapshot(NAN, NAN, NAN));
      interval_loss += s.loss_sum;
      interval_correct += static_cast<double>(s.correct);
      interval_samples += static_cast<double>(s.samples);
      const bool last = global_step_ >= total_steps;
      if (global_step_ % cfg_.metrics.log_every_steps == 0 || last || batch_in_epoch_ == num_batches) {
        std::vector<double> r = all_reduce_sum(ctx_, {interval_loss, interval_correct, interval_samples});
        const double elapsed = seconds_since(interval_start);
        const double sps = r[2] / std::max(elapsed, 1e-9);
        total_samples += r[2];
        JsonRecord rec;
        rec.add("kind", "train")
                          .add("step", global_step_)
                          .add("epoch", epoch + 1)
                          .add("loss", r[0] / r[2])
                          .add("accuracy", r[1] / r[2])
                          .add("lr", lr)
                          .add("samples_per_s", sps)
                          .add("samples", static_cast<int64_t>(r[2]))
                          .add("loss_scale", scaler_ ? scaler_->get_scale() : 1.0)
                          .add("skipped_steps", scaler_ ? scaler_->skipped_steps() : int64_t{0});
        rec.add("grad_norm", s.grad_norm);
        add_device_metrics(rec);
        write_metrics(rec.add("wall_s", seconds_since(start)));
        if (tensorboard_) {
          tensorboard_->add_scalar("train/loss", r[0] / r[2], global_step_);
          tensorboard_->add_scalar("train/accuracy", r[1] / r[2], global_step_);
          tensorboard_->add_scalar("lr", lr, global_step_);
          tensorboard_->add_scalar("amp/loss_scale", scaler_ ? scaler_->get_scale() : 1.0, global_step_);
          tensorboard_->add_scalar("perf/samples_per_s", sps, global_step_);
          tensorboard_->add_scalar("amp/skipped_steps", static_cast<double>(scaler_ ? scaler_->skipped_steps() : 0),
                                   global_step_);
        }
        progress_.on_log(snapshot(r[0] / r[2], r[1] / r[2], sps));
        interval_loss = interval_correct = interval_samples = 0;
        interval_start = Clock::now();
      }
      // A step that ends the epoch is saved after the epoch's evaluation (below), so a resume from it does not
      // evaluate that step again (TensorBoard would hold its eval point twice: purge starts after the step).
      if (every_steps_hit() && batch_in_epoch_ < num_batches) save_checkpoint(-1);
      if (stop_requested()) {
        save_checkpoint(-1);
        summary.preempted = true;
        log("preempted by signal " + std::to_string(preemption_signal()) + " at step " +
            std::to_string(global_step_) + "; checkpoint in " + cfg_.checkpoint.dir +
            "; run the same command again to resume (checkpoint.resume = \"auto\")");
        summary.steps = global_step_;
        summary.wall_s = seconds_since(start);
        return summary;
      }
      if (last) {
        done = true;
        break;
      }
    }
    progress_.end_epoch();
    if (batch_in_epoch_ < num_batches) break;  // max_steps reached inside the epoch
    ++epoch_;
    batch_in_epoch_ = 0;
    epoch_sample_offset_ = 0;
    evaluated_last = false;
    const int64_t every = cfg_.training.eval_every_epochs;
    double accuracy = -1;
    if (every > 0 && (epoch_ % every == 0)) {
      summary.final_eval = evaluate();
      accuracy = summary.final_eval.accuracy;
      best_accuracy_ = std::max(best_accuracy_, accuracy);
      evaluated_last = true;
      report_eval(summary.final_eval, epoch_, seconds_since(start), "epoch " + std::to_string(epoch_));
    }
    if ((cfg_.checkpoint.every_epochs > 0 && epoch_ % cfg_.checkpoint.every_epochs == 0) || every_steps_hit())
      save_checkpoint(accuracy);
    if (global_step_ >= total_steps) done = true;
  }
  if (stop_vote_.pending()) stop_vote_.wait();  // the last step's vote, already in flight; nobody stops now
  dataset_.train.release_images();                // training is over: the final evaluation needs only the test split
  if (!evaluated_last) {
    summary.final_eval = evaluate();
    best_accuracy_ = std::max(best_accuracy_, summary.final_eval.accuracy);
    report_eval(summary.final_eval, epoch_, seconds_since(start), "(final)");
  }
  // The final state is a checkpoint too (a later run with more epochs or max_steps continues from it).
  const bool checkpointing = cfg_.checkpoint.every_steps > 0 || cfg_.checkpoint.every_epochs > 0;
  if (checkpointing && last_checkpoint_step_ != global_step_) save_checkpoint(summary.final_eval.accuracy);
  summary.best_accuracy = best_accuracy_;
  summary.steps = global_step_;
  summary.epochs = epoch_;
  summary.wall_s = seconds_since(start);
  summary.samples_per_s = total_samples / std::max(summary.wall_s, 1e-9);
  summary.skipped_steps = scaler_ ? scaler_->skipped_steps() : 0;
  summary.gpu_mem_peak_mib = gpu_mem_peak_mib().value_or(-1);
  summary.checkpoints_written = checkpoints_written_;
  summary.model_path = cfg_.job.out_dir + "/model.pt";
  std::string model_error;
  if (ctx_.is_main()) {
    try {  // atomic: a full or read-only disk leaves the previous model.pt as it was
      save_state_dict(summary.model_path, module_state(*model_));
      print_summary(summary);
    } catch (const std::exception& e) {
      model_error = std::string("writing the trained model failed: ") + e.what() +
                    " (any previous model.pt is intact; the final checkpoint, if any, holds the trained state)";
    }
  }
  if (all_reduce_max(ctx_, model_error.empty() ? 0.0 : 1.0) > 0)
    throw std::runtime_error(ctx_.is_main() ? model_error : "rank 0 failed to write the trained model");
  return summary;
}

void Trainer::print_summary(const TrainSummary& s) {
  char buf[128];
  auto row = [&](const char* name, const std::string& value) {
    std::snprintf(buf, sizeof buf, "  %-22s %s", name, value.c_str());
    log(buf);
  };
  log("summary");
  row("final eval accuracy", fmt("%.4f", s.final_eval.accuracy) + " (best " + fmt("%.4f", s.best_accuracy) + ")");
  if (s.final_eval.correct_top5 >= 0) row("final eval top-5", fmt("%.4f", s.final_eval.accuracy_top5));
  row("epochs done / steps", std::to_string(s.epochs) + " / " + std::to_string(s.steps));
  row("wall time", fmt("%.1f s", s.wall_s));
  row("mean samples/s", fmt("%.0f", s.samples_per_s));
  row("skipped AMP steps", std::to_string(s.skipped_steps));
  if (s.gpu_mem_peak_mib >= 0) row("peak GPU memory", fmt("%.0f MiB (max over ranks)", s.gpu_mem_peak_mib));
  row("checkpoints written", std::to_string(s.checkpoints_written));
  if (step_memory_) {
    const StepAllocator::Stats m = step_memory_->stats();
    const std::string no_plan = "no plan (fewer than " + std::to_string(StepAllocator::kRecordedStep) + " steps)";
    const std::string planned = fmt("planned block %.1f MiB, ", static_cast<double>(m.plan_bytes) / (1 << 20)) +
                                std::to_string(m.planned_steps) + " of " + std::to_string(m.steps) + " steps from it";
    row("step memory", m.plan_bytes > 0 ? planned : no_plan);
  }
  row("model", s.model_path);
}

}  // namespace ddp

namespace ddp {

EvalResult Trainer::evaluate_only() {
  open_metrics(/*append=*/false);
  const auto start = Clock::now();
  EvalResult e = evaluate();
  report_eval(e, 0, seconds_since(start), "(eval only)");
  barrier(ctx_);
  return e;
}

}  // namespace ddp
