// Trainer state: state_dict / load_state_dict, checkpoint writing, resume selection, preemption agreement.
#include "amp/grad_scaler.h"
#include "app/preemption.h"
#include "app/trainer.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/pickle_reader.h"
#include "checkpoint/state_dict.h"
#include "dist/reduce.h"
#include "optim/optimizer_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace ddp {
namespace {

constexpr int64_t kFormatVersion = 1;

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

const c10::IValue& field(const c10::impl::GenericDict& d, const std::string& key) {
  auto it = d.find(key);
  if (it == d.end()) throw std::runtime_error("checkpoint has no \"" + key + "\" entry");
  return it->value();
}

}  // namespace

c10::impl::GenericDict Trainer::state_dict() {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("format_version", kFormatVersion);
  c10::impl::GenericDict model(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : module_state(*model_)) model.insert(name, t.detach().cpu().clone());
  out.insert("model", model);
  out.insert("optimizer_name", cfg_.optimizer.name);
  out.insert("optimizer", optimizer_state_dict(*optimizer_));
  out.insert("scaler",
             scaler_ ? scaler_->state_dict() : c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
  out.insert("global_step", global_step_);
  out.insert("epoch", epoch_);
  out.insert("batch_in_epoch", batch_in_epoch_);
  out.insert("epoch_sample_offset", epoch_sample_offset_);
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
  const int64_t version = field(state, "format_version").toInt();
  if (version != kFormatVersion)
    throw std::runtime_error("checkpoint format_version " + std::to_string(version) + " is not supported (expected " +
                             std::to_string(kFormatVersion) + ")");
  NamedTensors model;
  for (const auto& item : field(state, "model").toGenericDict())
    model.emplace_back(item.key().toStringRef(), item.value().toTensor());
  apply_state(*model_, model, "checkpoint");
  const std::string opt_name = field(state, "optimizer_name").toStringRef();
  if (opt_name != cfg_.optimizer.name)
    throw std::runtime_error("checkpoint was written with optimizer " + opt_name + ", config asks for " +
                             cfg_.optimizer.name);
  load_optimizer_state_dict(*optimizer_, field(state, "optimizer").toGenericDict());
  const auto scaler_state = field(state, "scaler").toGenericDict();
  if (scaler_ && scaler_state.size() > 0) scaler_->load_state_dict(scaler_state);
  global_step_ = field(state, "global_step").toInt();
  epoch_ = field(state, "epoch").toInt();
  batch_in_epoch_ = field(state, "batch_in_epoch").toInt();
  best_accuracy_ = field(state, "best_accuracy").toDouble();
  const int64_t saved_world = field(state, "world_size").toInt();
  std::vector<torch::Tensor> rngs;
  for (const auto& v : field(state, "rng_cpu").toListRef()) rngs.push_back(v.toTensor());
  epoch_sample_offset_ = field(state, "epoch_sample_offset").toInt();
  const int64_t saved_batch = field(state, "batch_size").toInt();
  if (saved_world != ctx_.world_size || saved_batch != cfg_.data.batch_size) {
    // Continue the epoch from the saved position in the global sample order, re-sharded for this world.
    epoch_sample_offset_ += batch_in_epoch_ * saved_batch * saved_world;
    batch_in_epoch_ = 0;
    if (ctx_.is_main())
      std::cerr << "warning: checkpoint was written by " << saved_world << " rank(s) x batch " << saved_batch
                << ", resuming on " << ctx_.world_size << " x " << cfg_.data.batch_size << ": epoch " << epoch_ + 1
                << " continues from sample " << epoch_sample_offset_
                << " of the global order, re-sharded (not bit-identical to an uninterrupted run)" << std::endl;
  }
  restore_rank_generator(at::detail::getDefaultCPUGenerator(), rngs);
  // A CUDA run's generators too; a CUDA run's checkpoint resumes on CPU with the CPU generators alone.
  if (ctx_.device.is_cuda()) {
    std::vector<torch::Tensor> cuda_rngs;
    auto it = state.find("rng_cuda");  // absent in checkpoints of ddptrain 0.3.0 and earlier
    if (it != state.end())
      for (const auto& v : it->value().toListRef()) cuda_rngs.push_back(v.toTensor());
    restore_rank_generator(at::globalContext().defaultGenerator(ctx_.device), cuda_rngs);
  }
  if (field(state, "config_hash").toStringRef() != config_hash(resumable_config(cfg_)) && ctx_.is_main())
    std::cerr << "warning: the config differs from the one the checkpoint was written with" << std::endl;
}

void Trainer::restore_rank_generator(at::Generator gen, const std::vector<torch::Tensor>& per_rank) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  if (ctx_.rank < static_cast<int64_t>(per_rank.size()))
    gen.set_state(per_rank[static_cast<size_t>(ctx_.rank)]);
  else  // written by fewer ranks (or, for CUDA, on CPU): a fresh, reproducible stream per rank and step
    gen.set_current_seed(static_cast<uint64_t>(cfg_.job.seed + ctx_.rank + global_step_));
}

void Trainer::save_checkpoint(double eval_accuracy) {
  c10::impl::GenericDict state = state_dict();  // collective (RNG gather)
  last_checkpoint_step_ = global_step_;
  std::string error;
  if (ctx_.is_main()) {
    try {
      // Test hook: DDPTRAIN_TEST_FAIL_CHECKPOINT_AT_STEP=k makes the write at step k fail like a full disk.
      const char* fail_at = std::getenv("DDPTRAIN_TEST_FAIL_CHECKPOINT_AT_STEP");
      if (fail_at && std::atoll(fail_at) == global_step_)
        throw std::runtime_error("No space left on device (test hook)");
      CheckpointStore store(cfg_.checkpoint.dir, cfg_.checkpoint.keep_last, cfg_.checkpoint.keep_best);
      CheckpointInfo info = store.save(torch_save_bytes(state), global_step_, epoch_, eval_accuracy);
      log("checkpoint " + info.payload_path);
      ++checkpoints_written_;
    } catch (const std::exception& e) {
      error = std::string("checkpoint at step ") + std::to_string(global_step_) + " failed: " + e.what() +
              " (earlier checkpoints are intact)";
    }
  }
  // Every rank learns whether rank 0's write failed, so on_error = fail stops all of them together.
  const bool failed = all_reduce_max(ctx_, error.empty() ? 0.0 : 1.0) > 0;
  if (!failed) return;
  if (cfg_.checkpoint.on_error == "warn") {
    if (ctx_.is_main()) std::cerr << "warning: " << error << std::endl;
    return;
  }
  throw std::runtime_error(ctx_.is_main() ? error : "rank 0 failed to write a checkpoint");
}

void Trainer::resume() {
  const std::string& mode = cfg_.checkpoint.resume;
  std::vector<char> bytes;
  std::string chosen, error;
  if (ctx_.is_main() && mode != "never") {
    try {
      if (mode == "auto") {
        CheckpointStore store(cfg_.checkpoint.dir, cfg_.checkpoint.keep_last, cfg_.checkpoint.keep_best);
        auto info = store.newest_valid([](const std::string& w) { std::cerr << "warning: " << w << std::endl; });
        if (info) {
          chosen = info->payload_path;
          bytes = read_bytes(chosen);
        }
      } else {
        chosen = mode;
        std::string manifest = std::filesystem::path(mode).replace_extension(".json").string();
        if (auto info = CheckpointStore::read_manifest(manifest)) {
          std::string problem = CheckpointStore::verify(*info);
          if (!problem.empty()) throw std::runtime_error(problem);
        }
        bytes = read_bytes(mode);
      }
    } catch (const std::exception& e) {
      error = e.what();
      bytes.clear();
    }
  }
  const bool failed = all_reduce_max(ctx_, error.empty() ? 0.0 : 1.0) > 0;
  if (failed) throw std::runtime_error(ctx_.is_main() ? "resume: " + error : "rank 0 could not read the checkpoint");
  broadcast_bytes(ctx_, bytes);
  open_metrics(/*append=*/!bytes.empty());
  if (bytes.empty()) return;
  c10::IValue value;
  try {
    value = read_torch_save(bytes);
  } catch (const std::exception& e) {
    throw std::runtime_error("resume: " + (chosen.empty() ? std::string("checkpoint") : chosen) +
                             " is not a readable checkpoint: " + std::string(e.what()).substr(0, 200));
  }
  if (!value.isGenericDict()) throw std::runtime_error("resume: " + chosen + " is not a checkpoint dict");
  try {
    load_state_dict(value.toGenericDict());
  } catch (const std::exception& e) {
    throw std::runtime_error("resume from " + (chosen.empty() ? std::string("rank 0's checkpoint") : chosen) + ": " +
                             e.what());
  }
  // The points the interrupted run logged after this checkpoint are orphans: TensorBoard drops them.
  if (tensorboard_) tensorboard_->purge_from(global_step_ + 1);
  log("resumed from " + chosen + " at step " + std::to_string(global_step_) + " (epoch " + std::to_string(epoch_ + 1) +
      ", micro-batch " + std::to_string(batch_in_epoch_) + ")");
}

bool Trainer::stop_requested() {
  const double local = preemption_signal() != 0 ? 1.0 : 0.0;
  if (!ctx_.distributed()) return local > 0;
  const bool stop = stop_vote_.pending() && stop_vote_.wait() > 0;
  if (!stop) stop_vote_.start(local);
  return stop;
}

}  // namespace ddp
