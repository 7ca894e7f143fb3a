// Trainer state: state_dict / load_state_dict (what a checkpoint holds of a run, and restoring it).
#include "amp/grad_scaler.h"
#include "train/trainer.h"
#include "checkpoint/checkpoint_entries.h"
#include "checkpoint/state_dict.h"
#include "distributed/reduce.h"
#include "optim/optimizer_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>


namespace ddp {
namespace {

// 2: optimizer in torch.optim's state_dict() form; 1: its flat "<index>.<field>" layout (still read).
constexpr int64_t kFormatVersion = 2;

std::string config_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The config minus keys that may change between a run and its resumption without changing the math.
std::string resumable_config(Config cfg) {
  cfg.training.epochs = 0;
  cfg.training.max_steps = 0;
  cfg.checkpoint = CheckpointConfig{};
  cfg.metrics = MetricsConfig{};
  cfg.job.out_dir = "";
  cfg.job.name = "";
  cfg.data.workers = 0;
  cfg.data.prefetch = 1;
  return format_config(cfg);
}

// The checkpoint was written with this config, up to the keys a resumption may change. A matching hash says so at
// once; otherwise the checkpoint's "config" text is read back and compared, so that a config printed differently
// but meaning the same (a checkpoint written before choices were enums kept amp.dtype = "fp16" as given, where it
// now prints "float16") is the same. No hash: nothing to compare (README: no config warning).
bool written_with(const c10::impl::GenericDict& state, const Config& cfg) {
  const c10::IValue* hash = ckpt_optional_entry(state, "config_hash");
  if (!hash) return true;
  const std::string own = resumable_config(cfg);
  if (hash->isString() && hash->toStringRef() == config_hash(own)) return true;
  const c10::IValue* text = ckpt_optional_entry(state, "config");
  if (!text || !text->isString()) return false;
  try {
    return resumable_config(parse_config(text->toStringRef(), "the checkpoint's config")) == own;
  } catch (const ConfigError&) {  // keys or values this version no longer reads: a different config
    return false;
  }
}

}  // namespace

c10::impl::GenericDict Trainer::state_dict() {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("format_version", kFormatVersion);
  c10::impl::GenericDict model(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : module_state(*model_)) model.insert(name, t.detach().cpu().clone());
  out.insert("model", model);
  out.insert("optimizer_name", choice_name(cfg_.optimizer.name));
  out.insert("optimizer", optimizer_state_dict(*optimizer_));
  out.insert("scaler", scaler_->state_dict());  // empty when loss scaling is off, as Python's disabled GradScaler
  out.insert("global_step", global_step_);
  out.insert("epoch", position_.epoch);
  out.insert("batch_in_epoch", position_.batch_in_epoch);
  out.insert("epoch_sample_offset", position_.sample_offset);
  out.insert("batch_size", cfg_.data.batch_size);
  out.insert("world_size", ctx_.world_size);
  out.insert("best_accuracy", best_accuracy_);
  // Every rank's CPU generator state (dropout streams differ per rank).
  torch::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
  c10::List<at::Tensor> rngs;
  for (auto& t : all_gather(ctx_, rng)) rngs.push_back(t);
  out.insert("rng_cpu", rngs);
  // Every rank's CUDA generator state (torch.cuda.get_rng_state()) on a CUDA run; empty on CPU.
  c10::List<at::Tensor> cuda_rngs;
  if (ctx_.device.is_cuda())
    for (auto& t : all_gather(ctx_, at::globalContext().defaultGenerator(ctx_.device).get_state()))
      cuda_rngs.push_back(t);
  out.insert("rng_cuda", cuda_rngs);
  out.insert("config", format_config(cfg_));
  out.insert("config_hash", config_hash(resumable_config(cfg_)));
  return out;
}

void Trainer::load_state_dict(const c10::impl::GenericDict& state) {
  const c10::IValue* version_entry = ckpt_optional_entry(state, "format_version");
  const int64_t version = version_entry ? ckpt_int_entry(*version_entry, "format_version") : kFormatVersion;
  if (version != 1 && version != kFormatVersion)
    throw std::runtime_error("checkpoint format_version " + std::to_string(version) +
                             " is not supported (expected 1 or " + std::to_string(kFormatVersion) + ")");
  apply_state(*model_, ckpt_model_entry(state), "checkpoint");
  load_optimizer_entry(state, version);
  if (const c10::IValue* scaler_state = ckpt_optional_entry(state, "scaler")) {  // absent: a fresh scaler
    const auto scaler_dict = ckpt_dict_entry(*scaler_state, "scaler");
    if (scaler_dict.size() > 0) scaler_->load_state_dict(scaler_dict);  // a disabled scaler ignores it
  }
  load_training_position(state);
  // Absent generator states: each rank's generator seeded from job.seed, rank and step.
  restore_rank_generator(at::detail::getDefaultCPUGenerator(),
                         ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cpu"), "rng_cpu"));
  // A CUDA run's generators too; a CUDA run's checkpoint resumes on CPU with the CPU generators alone.
  if (ctx_.device.is_cuda())  // rng_cuda is absent in checkpoints of ddptrain 0.3.0 and earlier
    restore_rank_generator(at::globalContext().defaultGenerator(ctx_.device),
                           ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cuda"), "rng_cuda"));
  if (!written_with(state, cfg_)) progress_.warning("the config differs from the one the checkpoint was written with");
}

void Trainer::load_optimizer_entry(const c10::impl::GenericDict& state, int64_t format_version) {
  const auto opt_state = ckpt_dict_entry(ckpt_required_entry(state, "optimizer"), "optimizer");
  const c10::IValue* name_entry = ckpt_optional_entry(state, "optimizer_name");
  if (name_entry && !name_entry->isString()) ckpt_wrong_entry_type("optimizer_name", *name_entry, "a str");
  std::string opt_name;  // "": neither the entry nor param_groups say
  if (name_entry)
    opt_name = name_entry->toStringRef();
  else if (const std::optional<OptimizerName> from_groups = optimizer_from_param_groups(opt_state))
    opt_name = choice_name(*from_groups);
  if (opt_name.empty())
    throw std::runtime_error(
        "checkpoint entry \"optimizer\" is not torch.optim.SGD's or AdamW's state_dict() "
        "(param_groups[0] has neither \"momentum\" nor \"betas\")");
  if (opt_name != choice_name(cfg_.optimizer.name))
    throw std::runtime_error("checkpoint was written with optimizer " + opt_name + ", config asks for " +
                             choice_name(cfg_.optimizer.name));
  if (format_version == 1) {
    load_flat_optimizer_state_dict(*optimizer_, opt_state);
    return;
  }
  const std::vector<std::string> differences = load_optimizer_state_dict(*optimizer_, opt_state);
  if (differences.empty()) return;
  std::string list;
  for (const auto& d : differences) list += (list.empty() ? "" : ", ") + d;
  progress_.warning("the checkpoint's optimizer param_groups differ from the config, whose values are used: " + list);
}

void Trainer::load_training_position(const c10::impl::GenericDict& state) {
  ckpt_check_position(state, dataset_.train.size());
  global_step_ = ckpt_int_entry(ckpt_required_entry(state, "global_step"), "global_step");
  const c10::IValue* epoch = ckpt_optional_entry(state, "epoch");
  const c10::IValue* batch = ckpt_optional_entry(state, "batch_in_epoch");
  if (epoch && batch) {
    position_.epoch = ckpt_int_entry(*epoch, "epoch");
    position_.batch_in_epoch = ckpt_int_entry(*batch, "batch_in_epoch");
  } else {  // derived: global_step optimizer steps of steps_per_epoch() each, grad_accum_steps micro-batches a step
    const int64_t per_epoch = steps_per_epoch();
    position_.epoch = global_step_ / per_epoch;
    position_.batch_in_epoch = (global_step_ % per_epoch) * cfg_.training.grad_accum_steps;
  }
  const c10::IValue* offset = ckpt_optional_entry(state, "epoch_sample_offset");
  position_.sample_offset = offset ? ckpt_int_entry(*offset, "epoch_sample_offset") : 0;
  if (const c10::IValue* best = ckpt_optional_entry(state, "best_accuracy"))
    best_accuracy_ = best->isDouble() ? best->toDouble() : static_cast<double>(best->toInt());
  const c10::IValue* world = ckpt_optional_entry(state, "world_size");
  const c10::IValue* batch_size = ckpt_optional_entry(state, "batch_size");
  const int64_t saved_world = world ? ckpt_int_entry(*world, "world_size") : ctx_.world_size;
  const int64_t saved_batch = batch_size ? ckpt_int_entry(*batch_size, "batch_size") : cfg_.data.batch_size;
  if (saved_world == ctx_.world_size && saved_batch == cfg_.data.batch_size) return;
  position_.reshard(saved_world, saved_batch);
  progress_.warning("checkpoint was written by " + std::to_string(saved_world) + " rank(s) x batch " +
                    std::to_string(saved_batch) + ", resuming on " + std::to_string(ctx_.world_size) + " x " +
                    std::to_string(cfg_.data.batch_size) + ": epoch " + std::to_string(position_.epoch + 1) +
                    " continues from sample " + std::to_string(position_.sample_offset) +
                    " of the global order, re-sharded (not bit-identical to an uninterrupted run)");
}

void Trainer::restore_rank_generator(at::Generator gen, const std::vector<torch::Tensor>& per_rank) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  if (ctx_.rank < static_cast<int64_t>(per_rank.size()))
    gen.set_state(per_rank[static_cast<size_t>(ctx_.rank)]);
  else  // written by fewer ranks (or, for CUDA, on CPU): a fresh, reproducible stream per rank and step
    gen.set_current_seed(static_cast<uint64_t>(cfg_.job.seed + ctx_.rank + global_step_));
}

}  // namespace ddp
