// Trainer: set-up (data, model, optimizer, loss scaler, gradient sync) and the run's plan (steps, epochs, batches).
#include "train/trainer.h"

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "base/first_line.h"
#include "base/number_text.h"
#include "checkpoint/checkpointer.h"
#include "data/device_feed.h"
#include "data/distributed_sampler.h"
#include "data/gpu_decode.h"
#include "data/loader_options.h"
#include "data/ra_sampler.h"
#include "data/shard_sampler.h"
#include "distributed/gradient_sync.h"
#include "models/conv.h"
#include "report/gpu_memory.h"
#include "report/mlflow_records.h"
#include "optim/gradients.h"
#include "optim/optimizer.h"
#include "train/batch_norm_sync.h"
#include "train/device_settings.h"
#include "train/graph_state.h"
#include "train/init_weights.h"

#include <ATen/cpu/Utils.h>

#include <algorithm>
#include <limits>

namespace ddp {

Trainer::Trainer(Config cfg, DistContext ctx)
    : cfg_(std::move(cfg)),
      ctx_(std::move(ctx)),
      reporter_(
          cfg_.metrics, cfg_.job.out_dir, ctx_.device,
          ReportingRanks{ctx_.rank, ctx_.world_size, places_of(ctx_.views)},
          [this](const std::vector<double>& v) { return all_reduce_sum(ctx_, v); },
          [this](double v) { return all_reduce_max(ctx_, v); }),
      generators_(ctx_, cfg_.job.seed),
      mix_(cfg_.data.mixup_alpha, cfg_.data.cutmix_alpha, cfg_.model.num_classes) {
  state_.batch_size = cfg_.data.batch_size;
  state_.world_size = ctx_.world_size;
  state_.world_sizes = {1, ctx_.world_size};
  if (!cfg_.metrics.mlflow_uri.empty()) reporter_.track_in_mlflow(mlflow_run_spec(cfg_));
}

LoaderOptions Trainer::loader_options(int64_t batch_size, bool drop_last) const {
  const bool channels_last = model_config().memory_format == MemoryFormat::ChannelsLast;
  LoaderOptions o =
      configured_loader(cfg_.data, batch_size, drop_last, loader_workers(), ctx_.device,
                        channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous,
                        static_cast<uint64_t>(cfg_.job.seed));
  o.epoch = state_.position.epoch;
  o.threads = loader_threads_;
  return o;
}

std::unique_ptr<EpochSampler> Trainer::train_sampler(int64_t order_world, int64_t world) const {
  const int64_t n = dataset_.train.size(), reps = cfg_.data.ra_reps;
  const auto seed = static_cast<uint64_t>(cfg_.job.seed);
  const int64_t ranks = world > 0 ? world : ctx_.world_size, rank = world > 0 ? 0 : ctx_.rank;
  if (!dataset_.train.shard_sizes.empty())
    return std::make_unique<ShardSampler>(dataset_.train.shard_sizes, order_world > 0 ? order_world : ranks, ranks,
                                          rank, shard_order(cfg_.data, cfg_.job.seed));
  if (reps <= 1)
    return std::make_unique<DistributedSampler>(n, ranks, rank, cfg_.data.shuffle, seed, cfg_.data.drop_last,
                                                cfg_.data.batch_size);
  return std::make_unique<RASampler>(n, ranks, rank, cfg_.data.shuffle, seed, reps);
}

void Trainer::setup() {
  if (cfg_.job.threads > 0) torch::set_num_threads(static_cast<int>(cfg_.job.threads));
  // Before the first CUDA operation (cuBLAS reads its workspace setting).
  configure_math_modes(cfg_.training, ctx_.device);
  const auto message = [this](const std::string& line) { reporter_.message(line); };
  // data.decode = "gpu" where it cannot run is an error before anything is read.
  const bool decode_on_gpu = decode_on_device(cfg_.data, ctx_.device);
  dataset_ = load_dataset(cfg_.data, cfg_.model, cfg_.job.seed, message);
  if (decode_on_gpu)
    reporter_.message("data.decode = \"" + choice_name(cfg_.data.decode) +
                      "\": JPEGs decoded and transformed by nvJPEG on " + ctx_.device.str() +
                      "; other files (PNG, CMYK, 12-bit, arithmetic, lossless) on the loader threads");
  build_model();
  const TrainingConfig& t = cfg_.training;
  // During lr_scheduler's warmup (steps 1 to warmup_steps), training.ema_adjust restarts the average at each update.
  ema_ = std::make_unique<AveragedModel>(
      t.ema_decay > 0 ? make_model(model_config()) : nullptr, ema_decay(),
      EmaSchedule{t.ema_every_steps, t.ema_adjust ? cfg_.lr_scheduler.warmup_steps : 0});
  if (ema_->enabled() && t.ema_adjust)
    reporter_.message("training.ema_adjust: EMA decay " + number_text("%.8g", ema_decay()) + " (training.ema_decay " +
                      number_text("%.8g", t.ema_decay) + ")");
  if (ema_->enabled()) ema_->model().to(ctx_.device);
  gradient_sync_ = make_gradient_sync(model_, ctx_, cfg_.dist);
  generators_.seed_per_rank();  // dropout draws from the global generator
  build_scaler();
  const bool linear = cfg_.optimizer.scale_lr == LrScaling::Linear;
  base_lr_ = cfg_.optimizer.lr * (linear ? static_cast<double>(ctx_.world_size) : 1.0);
  optimizer_ = make_optimizer(cfg_.optimizer, base_lr_,
                              weight_decay_groups(*model_, cfg_.optimizer, [this](const torch::nn::Module& m) {
                                return model_->is_norm_layer(m);
                              }));
  build_graph();
  checkpointer_ = std::make_unique<Checkpointer>(cfg_.checkpoint, cfg_.job.out_dir, ctx_, message,
                                                 [this](const std::string& line) { reporter_.warning(line); });
  profiler_ = std::make_unique<StepProfiler>(cfg_.profile, cfg_.job.out_dir, ctx_.rank, ctx_.device);
  sample_log_ = std::make_unique<SampleLog>(cfg_.metrics.sample_ids, cfg_.job.out_dir, ctx_.rank, ctx_.world_size);
  reporter_.banner(run_facts());
  if (cfg_.amp.enabled && ctx_.device.is_cpu())
    if (const std::string w = cpu_autocast_warning(amp_dtype_, at::cpu::get_cpu_capabilities()); !w.empty())
      reporter_.warning(w);
  if (profiler_->memory_snapshot_unavailable())
    reporter_.warning("profile.memory_snapshot records the CUDA caching allocator, and this run is on " +
                      ctx_.device.str() + ": the trace is written without a memory snapshot");
  if (const auto gpu = describe_gpu(ctx_.device))
    reporter_.set_device_peak(gpu->name, cfg_.amp.enabled                 ? MathPrecision::kBf16Fp16
                                         : cfg_.training.cudnn_allow_tf32 ? MathPrecision::kTf32
                                                                          : MathPrecision::kFp32);
}

ModelConfig Trainer::model_config() const {
  ModelConfig model_cfg = cfg_.model;
  // The side of the images the model is built for (a ViT's position embedding, a plugin's ModelOptions).
  model_cfg.image_size = cfg_.data.train_crop_size ? cfg_.data.train_crop_size : cfg_.data.image_size;
  // On CUDA, "auto" is channels_last for every model: cuDNN's tensor-core convolutions run NHWC. On the CPU under
  // autocast it is contiguous for every model: oneDNN's NHWC convolutions in bfloat16 and float16 are slower than its
  // NCHW ones (net: 0.7-0.8x the steps), where in float32 net's are faster (the model's own default).
  if (model_cfg.memory_format == MemoryFormat::Auto && ctx_.device.is_cuda())
    model_cfg.memory_format = MemoryFormat::ChannelsLast;
  else if (model_cfg.memory_format == MemoryFormat::Auto && cfg_.amp.enabled)
    model_cfg.memory_format = MemoryFormat::Contiguous;
  return model_cfg;
}

void Trainer::build_model() {
  torch::manual_seed(static_cast<uint64_t>(cfg_.job.seed));
  const ModelConfig model_cfg = model_config();
  try {
    model_ = make_model(model_cfg);
  } catch (const c10::Error& e) {  // the allocator's message names bytes, not the keys that asked for them
    if (std::string(e.what()).find("can't allocate memory") == std::string::npos) throw;
    throw std::runtime_error("model.name = \"" + cfg_.model.name.name +
                             "\" with model.num_classes = " + std::to_string(cfg_.model.num_classes) +
                             " and model.in_channels = " + std::to_string(cfg_.model.in_channels) +
                             " does not fit in memory: " + first_line(e.what()));
  }
  if (!cfg_.model.init_from.empty()) init_from_note_ = load_init_weights(*model_, cfg_.model, cfg_.model.init_from);
  model_->to(ctx_.device);
  // On CUDA, channels_last is how PyTorch users store the model too (model.to(memory_format=torch.channels_last)).
  // The CPU keeps NCHW storage and converts per convolution, so its results stay bit-identical to Python's.
  if (ctx_.device.is_cuda() && model_cfg.memory_format == MemoryFormat::ChannelsLast) store_channels_last(*model_);
  if (cfg_.model.sync_batchnorm) model_->synchronize_batchnorm(batch_norm_collectives(ctx_));
}

void Trainer::build_scaler() {
  if (cfg_.amp.enabled) amp_dtype_ = amp_dtype(cfg_.amp.dtype, ctx_.device.type());
  // auto: float16's narrow range needs loss scaling (torch.amp.GradScaler), bfloat16's does not.
  const bool scaling = cfg_.amp.enabled && (cfg_.amp.loss_scaling == LossScaling::Dynamic ||
                                            (cfg_.amp.loss_scaling == LossScaling::Auto && amp_dtype_ == c10::kHalf));
  scaler_ = std::make_unique<GradScaler>(cfg_.amp, scaling);
}

RunFacts Trainer::run_facts() const {
  RunFacts f;
  f.job = cfg_.job.name;
  f.world_size = ctx_.world_size;
  f.backend = ctx_.backend;
  f.device = ctx_.device.str();
  f.gpu = gpu_summary(ctx_.device);
  f.distributed = ctx_.distributed();
  f.allreduce = ctx_.allreduce;
  f.allreduce_note = ctx_.allreduce_note;
  f.rendezvous = ctx_.rendezvous;
  if (cfg_.dist.grad_compression == GradCompression::PowerSgd)
    f.grad_compression = "PowerSGD rank-" + std::to_string(cfg_.dist.powersgd_rank) + " factors from step " +
                         std::to_string(cfg_.dist.powersgd_start_step) +
                         (cfg_.dist.powersgd_products == PowerSgdProducts::Transposed ? ", transposed products" : "");
  else if (cfg_.dist.grad_compression != GradCompression::None)
    f.grad_compression = choice_name(cfg_.dist.grad_compression);
  f.model = cfg_.model.name.name;
  f.parameters = count_parameters(*model_);
  const int64_t batchnorm_layers = count_batchnorm_layers(*model_);
  const std::string layers = std::to_string(batchnorm_layers) + " BatchNorm layers";
  if (cfg_.model.sync_batchnorm)
    f.batchnorm = "sync_batchnorm on (" + layers +
                  (ctx_.world_size > 1 ? ", statistics over all " + std::to_string(ctx_.world_size) + " ranks)"
                                       : "; a world of one normalises its own batch)");
  else if (batchnorm_layers > 0)
    f.batchnorm = "sync_batchnorm off (" + layers + ", statistics per rank)";
  f.dataset = dataset_.name;
  f.train_size = dataset_.train.size();
  f.test_size = dataset_.test.size();
  if (!dataset_.train.transforms.empty())
    f.transforms = "train " + dataset_.train.transforms + " | test " + dataset_.test.transforms;
  f.batch_size = cfg_.data.batch_size;
  f.grad_accum_steps = cfg_.training.grad_accum_steps;
  f.steps_per_epoch = steps_per_epoch();
  f.amp = cfg_.amp.enabled ? amp_dtype_label(amp_dtype_) : "off";
  f.cudnn_benchmark = cudnn_benchmark_text(cfg_.training, ctx_.device);
  f.out_dir = cfg_.job.out_dir;
  f.init_from_note = init_from_note_;
  if (checkpointer_->enabled()) f.checkpoints = checkpointer_->replicas_text();
  f.classes = dataset_.classes;
  return f;
}

int64_t Trainer::steps_per_epoch() const { return steps_per_epoch(ctx_.world_size, cfg_.data.batch_size); }

int64_t Trainer::steps_per_epoch(int64_t world, int64_t batch) const {
  const int64_t batches = batches_in(train_sampler(0, world)->num_samples(), batch, cfg_.data.drop_last);
  return steps_in(batches, cfg_.training.grad_accum_steps);
}

int64_t Trainer::planned_steps(int64_t epochs) const {
  const EpochPosition& p = state_.position;
  if (p.epoch >= epochs) return state_.global_step;
  const std::unique_ptr<EpochSampler> sampler = train_sampler(p.order_world);
  sampler->set_epoch(p.epoch);
  const int64_t samples_left = static_cast<int64_t>(sampler->samples_from(p.sample_offset).indices.size());
  const int64_t batches_left =
      std::max<int64_t>(0, batches_in(samples_left, cfg_.data.batch_size, cfg_.data.drop_last) - p.batch_in_epoch);
  int64_t later = 0, total = 0;
  if (__builtin_mul_overflow(epochs - p.epoch - 1, steps_per_epoch(), &later) ||
      __builtin_add_overflow(later, state_.global_step + steps_in(batches_left, cfg_.training.grad_accum_steps),
                             &total))
    return std::numeric_limits<int64_t>::max();
  return total;
}

int64_t Trainer::epochs_to_train() const {
  if (cfg_.training.epochs > 0) return cfg_.training.epochs;
  const int64_t epoch = state_.position.epoch;
  const int64_t left = cfg_.training.max_steps - planned_steps(epoch + 1);
  if (left <= 0) return epoch + 1;
  const int64_t per_epoch = std::max<int64_t>(1, steps_per_epoch());
  return epoch + 1 + (left + per_epoch - 1) / per_epoch;
}

std::string Trainer::ended_by() const {
  const TrainingConfig& t = cfg_.training;
  if (t.epochs == 0 || t.max_steps == 0) return "";
  const std::string epochs = "training.epochs = " + std::to_string(t.epochs);
  const std::string steps = "training.max_steps = " + std::to_string(t.max_steps);
  const bool all_epochs = state_.position.epoch >= t.epochs, all_steps = state_.global_step >= t.max_steps;
  if (all_epochs && all_steps) return epochs + " and " + steps + " together";
  if (all_steps) return steps + " (in epoch " + std::to_string(state_.position.epoch + 1) + " of " + epochs + ")";
  return epochs + " (at step " + std::to_string(state_.global_step) + " of " + steps + ")";
}

double Trainer::ema_decay() const {
  const TrainingConfig& t = cfg_.training;
  if (!t.ema_adjust) return t.ema_decay;
  // references/classification/train.py: adjust = world_size * batch_size * model_ema_steps / epochs, the inverse of
  // the updates in a run up to the dataset's size (pycls' total_ema_updates); alpha = min(1.0, (1 - model_ema_decay)
  // * adjust); decay = 1 - alpha. An optimizer step takes grad_accum_steps micro-batches, so an update every
  // ema_every_steps steps is one every batch_size * grad_accum_steps * ema_every_steps samples of a rank.
  const double adjust = static_cast<double>(ctx_.world_size) * static_cast<double>(cfg_.data.batch_size) *
                        static_cast<double>(t.grad_accum_steps) * static_cast<double>(t.ema_every_steps) /
                        static_cast<double>(t.epochs);
  return 1.0 - std::min(1.0, (1.0 - t.ema_decay) * adjust);
}

void Trainer::check_training_batches(int64_t samples_per_rank, const std::string& where) const {
  const int64_t n = samples_per_rank, b = cfg_.data.batch_size;
  const std::string split = std::to_string(dataset_.train.size()) + " training samples over " +
                            std::to_string(ctx_.world_size) + " rank(s) = " + std::to_string(n) + " per rank" + where;
  const bool no_batch = n == 0 || (cfg_.data.drop_last && n < b);
  if (no_batch && !where.empty()) return;  // a resumed epoch with nothing left: the next one is whole
  const int64_t reps = cfg_.data.ra_reps;
  if (reps > 1 && n < b && where.empty())
    throw ConfigError("data.ra_reps = " + std::to_string(reps) +
                      ": RASampler trains floor(N // 256 * 256 / world) samples per rank and epoch: " + split +
                      ", fewer than data.batch_size = " + std::to_string(b) +
                      "; use more data (at least 256 samples, and a batch per rank), fewer ranks, a smaller batch, "
                      "or data.ra_reps = 0");
  if (no_batch)
    throw ConfigError("no optimizer steps to take: " + split + ", and data.drop_last = " +
                      (cfg_.data.drop_last ? "true drops a batch smaller than" : "false with") + " data.batch_size = " +
                      std::to_string(b) + "; lower data.batch_size, set data.drop_last = false or use more data");
  // The smallest batch a rank trains on: a partial last one unless dropped, else full ones.
  const int64_t partial = n % b;
  const int64_t smallest = (partial != 0 && !cfg_.data.drop_last) ? partial : b;
  const int64_t needed = model_->min_training_batch(dataset_.image_size);
  if (smallest >= needed) return;
  throw ConfigError("data.batch_size = " + std::to_string(b) + " leaves a training batch of " +
                    std::to_string(smallest) + " sample(s) on each rank (" + split + "), but " + cfg_.model.name.name +
                    "'s BatchNorm needs at least " + std::to_string(needed) + " samples per batch on " +
                    std::to_string(dataset_.image_size) + "x" + std::to_string(dataset_.image_size) +
                    " images; set data.drop_last = true or a data.batch_size that leaves no batch of " +
                    std::to_string(smallest));
}

}  // namespace ddp
