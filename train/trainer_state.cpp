// Trainer state: state_dict / load_state_dict, checkpoint writing, resume selection, preemption agreement.
#include "amp/grad_scaler.h"
#include "train/preemption.h"
#include "train/trainer.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/pickle_reader.h"
#include "checkpoint/state_dict.h"
#include "base/first_line.h"
#include "distributed/reduce.h"
#include "optim/optimizer_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>

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

// Entries a checkpoint must have (Python-written ones included); everything else has a default.
constexpr const char* kCkptRequiredEntries = "model, optimizer and global_step";

const c10::IValue& ckpt_required_entry(const c10::impl::GenericDict& d, const std::string& key) {
  auto it = d.find(key);
  if (it == d.end())
    throw std::runtime_error("checkpoint has no \"" + key + "\" entry (a checkpoint needs " + kCkptRequiredEntries +
                             ")");
  return it->value();
}

const c10::IValue* ckpt_optional_entry(const c10::impl::GenericDict& d, const std::string& key) {
  auto it = d.find(key);
  return it == d.end() ? nullptr : &it->value();
}

[[noreturn]] void ckpt_wrong_entry_type(const std::string& key, const c10::IValue& v, const char* expected) {
  throw std::runtime_error("checkpoint entry \"" + key + "\" is " + python_kind(v) + ", expected " + expected);
}

int64_t ckpt_int_entry(const c10::IValue& v, const std::string& key) {
  if (!v.isInt()) ckpt_wrong_entry_type(key, v, "an int");
  return v.toInt();
}

c10::impl::GenericDict ckpt_dict_entry(const c10::IValue& v, const std::string& key) {
  if (!v.isGenericDict()) ckpt_wrong_entry_type(key, v, "a dict");
  return v.toGenericDict();
}

std::vector<torch::Tensor> ckpt_tensor_list_entry(const c10::IValue* v, const std::string& key) {
  std::vector<torch::Tensor> out;
  if (!v) return out;
  if (!v->isList()) ckpt_wrong_entry_type(key, *v, "a list of tensors");
  for (const auto& x : v->toListRef()) {
    if (!x.isTensor()) ckpt_wrong_entry_type(key, *v, "a list of tensors");
    out.push_back(x.toTensor());
  }
  return out;
}

NamedTensors ckpt_model_entry(const c10::impl::GenericDict& state) {
  NamedTensors model;
  for (const auto& item : ckpt_dict_entry(ckpt_required_entry(state, "model"), "model")) {
    if (!item.key().isString() || !item.value().isTensor())
      throw std::runtime_error("checkpoint entry \"model\" is not a dict of name -> tensor");
    model.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return model;
}

// An int entry that must lie in [lo, hi]; `fallback` when absent.
int64_t ckpt_ranged_int(const c10::impl::GenericDict& d, const std::string& key, int64_t lo, int64_t hi,
                        int64_t fallback) {
  const c10::IValue* v = ckpt_optional_entry(d, key);
  if (!v) return fallback;
  const int64_t x = ckpt_int_entry(*v, key);
  if (x < lo || x > hi)
    throw std::runtime_error("checkpoint entry \"" + key + "\" is " + std::to_string(x) + ", outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// Bounds no honest checkpoint comes near; they keep every product below int64's range.
constexpr int64_t kCkptMaxStep = int64_t{1} << 53;
constexpr int64_t kCkptMaxWorld = int64_t{1} << 20;
constexpr int64_t kCkptMaxBatch = int64_t{1} << 31;

// Range checks of every entry the training position and the generators are restored from (a crafted or damaged
// checkpoint must not index outside the epoch): throws naming the entry and its allowed range.
void ckpt_check_position(const c10::impl::GenericDict& state, int64_t train_size) {
  const int64_t step = ckpt_ranged_int(state, "global_step", 0, kCkptMaxStep, -1);
  if (step < 0) ckpt_required_entry(state, "global_step");  // throws: absent
  ckpt_ranged_int(state, "epoch", 0, step, 0);  // every finished epoch took at least one step
  const int64_t world = ckpt_ranged_int(state, "world_size", 1, kCkptMaxWorld, 1);
  const int64_t batch = ckpt_ranged_int(state, "batch_size", 1, kCkptMaxBatch, 1);
  // Micro-batches one rank of the saved world has in an epoch (at most; drop_last has fewer).
  const int64_t per_rank = (train_size + world - 1) / world;
  const int64_t batches = (per_rank + batch - 1) / batch;
  const int64_t in_epoch = ckpt_ranged_int(state, "batch_in_epoch", 0, batches, 0);
  const int64_t offset = ckpt_ranged_int(state, "epoch_sample_offset", 0, train_size, 0);
  // The position a re-sharded resume continues from: within the (padded) epoch.
  const int64_t position = offset + in_epoch * batch * world;
  if (position > train_size + world * batch)
    throw std::runtime_error("checkpoint entries \"epoch_sample_offset\" + \"batch_in_epoch\" x \"batch_size\" x "
                             "\"world_size\" = " + std::to_string(position) + " lie beyond the epoch's " +
                             std::to_string(train_size) + " samples");
  if (const c10::IValue* best = ckpt_optional_entry(state, "best_accuracy")) {
    if (!best->isDouble() && !best->isInt()) ckpt_wrong_entry_type("best_accuracy", *best, "a float");
    const double b = best->isDouble() ? best->toDouble() : static_cast<double>(best->toInt());
    if (!(b >= 0 && b <= 1))
      throw std::runtime_error("checkpoint entry \"best_accuracy\" is " + std::to_string(b) + ", outside [0, 1]");
  }
  const int64_t state_bytes = at::detail::getDefaultCPUGenerator().get_state().numel();
  for (const auto& t : ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cpu"), "rng_cpu"))
    if (t.scalar_type() != at::kByte || t.dim() != 1 || t.numel() != state_bytes)
      throw std::runtime_error("checkpoint entry \"rng_cpu\" holds a tensor that is not a CPU generator state "
                               "(expected " + std::to_string(state_bytes) + " uint8 values)");
  if (const c10::IValue* scaler = ckpt_optional_entry(state, "scaler")) {
    for (const auto& item : ckpt_dict_entry(*scaler, "scaler")) {
      const c10::IValue& v = item.value();
      const double x = v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : 0.0;
      const std::string key = item.key().isString() ? item.key().toStringRef() : "?";
      const bool ok = (v.isDouble() || v.isInt()) && std::isfinite(x) &&
                      (key == "_growth_tracker" ? x >= 0 && x <= 1e9 : key == "growth_interval" ? x >= 1 && x <= 1e9
                                                                                               : x > 0);
      if (!ok) throw std::runtime_error("checkpoint entry \"scaler\" field \"" + key + "\" is out of range");
    }
  }
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
  const c10::IValue* version_entry = ckpt_optional_entry(state, "format_version");
  const int64_t version = version_entry ? ckpt_int_entry(*version_entry, "format_version") : kFormatVersion;
  if (version != 1 && version != kFormatVersion)
    throw std::runtime_error("checkpoint format_version " + std::to_string(version) +
                             " is not supported (expected 1 or " + std::to_string(kFormatVersion) + ")");
  apply_state(*model_, ckpt_model_entry(state), "checkpoint");
  load_optimizer_entry(state, version);
  if (const c10::IValue* scaler_state = ckpt_optional_entry(state, "scaler")) {  // absent: a fresh scaler
    const auto scaler_dict = ckpt_dict_entry(*scaler_state, "scaler");
    if (scaler_ && scaler_dict.size() > 0) scaler_->load_state_dict(scaler_dict);
  }
  load_training_position(state);
  // Absent generator states: each rank's generator seeded from job.seed, rank and step.
  restore_rank_generator(at::detail::getDefaultCPUGenerator(),
                         ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cpu"), "rng_cpu"));
  // A CUDA run's generators too; a CUDA run's checkpoint resumes on CPU with the CPU generators alone.
  if (ctx_.device.is_cuda())  // rng_cuda is absent in checkpoints of ddptrain 0.3.0 and earlier
    restore_rank_generator(at::globalContext().defaultGenerator(ctx_.device),
                           ckpt_tensor_list_entry(ckpt_optional_entry(state, "rng_cuda"), "rng_cuda"));
  const c10::IValue* hash = ckpt_optional_entry(state, "config_hash");
  if (hash && (!hash->isString() || hash->toStringRef() != config_hash(resumable_config(cfg_))) && ctx_.is_main())
    std::cerr << "warning: the config differs from the one the checkpoint was written with" << std::endl;
}

void Trainer::load_optimizer_entry(const c10::impl::GenericDict& state, int64_t format_version) {
  const auto opt_state = ckpt_dict_entry(ckpt_required_entry(state, "optimizer"), "optimizer");
  const c10::IValue* name_entry = ckpt_optional_entry(state, "optimizer_name");
  if (name_entry && !name_entry->isString()) ckpt_wrong_entry_type("optimizer_name", *name_entry, "a str");
  const std::string opt_name = name_entry ? name_entry->toStringRef() : optimizer_name_from_param_groups(opt_state);
  if (opt_name.empty())
    throw std::runtime_error(
        "checkpoint entry \"optimizer\" is not torch.optim.SGD's or AdamW's state_dict() "
        "(param_groups[0] has neither \"momentum\" nor \"betas\")");
  if (opt_name != cfg_.optimizer.name)
    throw std::runtime_error("checkpoint was written with optimizer " + opt_name + ", config asks for " +
                             cfg_.optimizer.name);
  if (format_version == 1) {
    load_flat_optimizer_state_dict(*optimizer_, opt_state);
    return;
  }
  const std::vector<std::string> differences = load_optimizer_state_dict(*optimizer_, opt_state);
  if (differences.empty() || !ctx_.is_main()) return;
  std::string list;
  for (const auto& d : differences) list += (list.empty() ? "" : ", ") + d;
  std::cerr << "warning: the checkpoint's optimizer param_groups differ from the config, whose values are used: "
            << list << std::endl;
}

void Trainer::load_training_position(const c10::impl::GenericDict& state) {
  ckpt_check_position(state, dataset_.train.size());
  global_step_ = ckpt_int_entry(ckpt_required_entry(state, "global_step"), "global_step");
  const c10::IValue* epoch = ckpt_optional_entry(state, "epoch");
  const c10::IValue* batch = ckpt_optional_entry(state, "batch_in_epoch");
  if (epoch && batch) {
    epoch_ = ckpt_int_entry(*epoch, "epoch");
    batch_in_epoch_ = ckpt_int_entry(*batch, "batch_in_epoch");
  } else {  // derived: global_step optimizer steps of steps_per_epoch() each, grad_accum_steps micro-batches a step
    const int64_t per_epoch = steps_per_epoch();
    epoch_ = global_step_ / per_epoch;
    batch_in_epoch_ = (global_step_ % per_epoch) * cfg_.training.grad_accum_steps;
  }
  const c10::IValue* offset = ckpt_optional_entry(state, "epoch_sample_offset");
  epoch_sample_offset_ = offset ? ckpt_int_entry(*offset, "epoch_sample_offset") : 0;
  if (const c10::IValue* best = ckpt_optional_entry(state, "best_accuracy"))
    best_accuracy_ = best->isDouble() ? best->toDouble() : static_cast<double>(best->toInt());
  const c10::IValue* world = ckpt_optional_entry(state, "world_size");
  const c10::IValue* batch_size = ckpt_optional_entry(state, "batch_size");
  const int64_t saved_world = world ? ckpt_int_entry(*world, "world_size") : ctx_.world_size;
  const int64_t saved_batch = batch_size ? ckpt_int_entry(*batch_size, "batch_size") : cfg_.data.batch_size;
  if (saved_world == ctx_.world_size && saved_batch == cfg_.data.batch_size) return;
  // Continue the epoch from the saved position in the global sample order, re-sharded for this world.
  epoch_sample_offset_ += batch_in_epoch_ * saved_batch * saved_world;
  batch_in_epoch_ = 0;
  if (ctx_.is_main())
    std::cerr << "warning: checkpoint was written by " << saved_world << " rank(s) x batch " << saved_batch
              << ", resuming on " << ctx_.world_size << " x " << cfg_.data.batch_size << ": epoch " << epoch_ + 1
              << " continues from sample " << epoch_sample_offset_
              << " of the global order, re-sharded (not bit-identical to an uninterrupted run)" << std::endl;
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
      CheckpointStore store(cfg_.checkpoint.dir, cfg_.checkpoint.keep_last, cfg_.checkpoint.keep_best);
      CheckpointInfo info = store.save(torch_save_bytes(state), global_step_, epoch_, eval_accuracy,
                                       [](const std::string& w) { std::cerr << "warning: " << w << std::endl; });
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
  std::vector<char> bytes;
  c10::IValue value;  // rank 0: the chosen checkpoint, parsed and range-checked while choosing
  std::string chosen, error;
  if (ctx_.is_main()) {
    try {
      chosen = choose_checkpoint(bytes, value);
    } catch (const std::exception& e) {
      error = e.what();
      if (error.rfind("resume from ", 0) != 0) error = "resume: " + error;
      bytes.clear();
    }
  }
  const bool failed = all_reduce_max(ctx_, error.empty() ? 0.0 : 1.0) > 0;
  if (failed) throw std::runtime_error(ctx_.is_main() ? error : "rank 0 could not read the checkpoint");
  broadcast_bytes(ctx_, bytes);
  open_metrics(/*append=*/!bytes.empty());
  if (bytes.empty()) return;
  if (!ctx_.is_main()) {
    std::string problem = ckpt_parse(bytes, value);
    if (!problem.empty()) throw std::runtime_error("resume from rank 0's checkpoint: " + problem);
  }
  try {
    load_state_dict(value.toGenericDict());
  } catch (const std::exception& e) {
    throw std::runtime_error("resume from " + (chosen.empty() ? std::string("rank 0's checkpoint") : chosen) + ": " +
                             first_line(e.what()));
  }
  // The points the interrupted run logged after this checkpoint are orphans: TensorBoard drops them.
  if (tensorboard_) tensorboard_->purge_from(global_step_ + 1);
  // This state is the checkpoint just read: the end of a run resumed at its last step writes it no second time.
  last_checkpoint_step_ = global_step_;
  log("resumed from " + chosen + " at step " + std::to_string(global_step_) + " (epoch " + std::to_string(epoch_ + 1) +
      ", micro-batch " + std::to_string(batch_in_epoch_) + ")");
}

std::string Trainer::ckpt_parse(const std::vector<char>& bytes, c10::IValue& value) const {
  try {
    value = read_torch_save(bytes);
  } catch (const std::exception& e) {
    return "not a readable checkpoint: " + first_line(e.what());
  }
  if (!value.isGenericDict()) return "not a checkpoint dict (torch.load gives " + python_kind(value) + ")";
  try {
    ckpt_check_position(value.toGenericDict(), dataset_.train.size());
  } catch (const std::exception& e) {
    return first_line(e.what());
  }
  return "";
}

std::string Trainer::choose_checkpoint(std::vector<char>& bytes, c10::IValue& value) {
  namespace fs = std::filesystem;
  const std::string& mode = cfg_.checkpoint.resume;
  std::set<std::string> said;  // each warning once (a listing and the line may both find an unreadable manifest)
  int64_t skipped = 0;
  bool counting = false;
  const WarnFn warn = [&](const std::string& w) {
    if (said.insert(w).second) std::cerr << "warning: " << w << std::endl;
    if (counting && w.find("(a crash while it was written?)") == std::string::npos) ++skipped;
  };
  CheckpointStore store(cfg_.checkpoint.dir, cfg_.checkpoint.keep_last, cfg_.checkpoint.keep_best);
  // What a crash mid-write left (rank 0 only writes here; other runs must not share the folder).
  for (const auto& p : store.remove_debris()) log("removed " + p + " (left by an interrupted write)");
  for (const auto& p : remove_temp_files(cfg_.job.out_dir, "model.pt")) log("removed " + p + " (left by an interrupted write)");
  const std::optional<std::vector<int64_t>> recorded = store.read_line(warn);
  const std::vector<CheckpointInfo> complete = store.list(warn);  // also says which manifests cannot be read
  // The line this run continues: the chosen checkpoint, then the older ones of the line it came from.
  auto line_from = [&](int64_t step) {
    std::vector<int64_t> line{step};
    if (recorded && std::find(recorded->begin(), recorded->end(), step) != recorded->end()) {
      for (int64_t s : *recorded)
        if (s < step) line.push_back(s);
    } else if (!recorded) {  // a folder of ddptrain 0.3.0 or before: every complete older checkpoint
      for (const auto& c : complete)
        if (c.step < step) line.push_back(c.step);
    }
    return line;
  };
  std::string chosen;
  std::vector<int64_t> line;
  if (mode == "auto") {
    counting = true;
    for (const auto& c : store.resume_candidates(warn)) {
      std::vector<char> b = read_bytes(c.payload_path);
      const std::string problem = ckpt_parse(b, value);
      if (problem.empty()) {
        chosen = c.payload_path;
        bytes = std::move(b);
        line = line_from(c.step);
        break;
      }
      warn("skipping checkpoint " + c.payload_path + ": " + problem + " (left in place)");
    }
    counting = false;
    if (chosen.empty() && skipped > 0)
      throw std::runtime_error("no usable checkpoint in " + cfg_.checkpoint.dir + " (" + std::to_string(skipped) +
                               " skipped, see the warnings above); move them away or set checkpoint.resume = never "
                               "or to a checkpoint file");
  } else if (mode != "never") {
    chosen = mode;
    const std::string manifest = fs::path(mode).replace_extension(".json").string();
    if (auto info = CheckpointStore::read_manifest(manifest)) {
      info->payload_path = mode;  // the manifest's size and CRC, checked against this file
      std::string problem = CheckpointStore::verify(*info);
      if (!problem.empty()) throw std::runtime_error(problem);
    }
    bytes = read_bytes(mode);
    const std::string problem = ckpt_parse(bytes, value);
    if (!problem.empty()) throw std::runtime_error("resume from " + mode + ": " + problem);
    if (auto step = store.step_of(mode)) line = line_from(*step);
  }
  // latest.json names the line auto follows from now on (a fresh line for never or a checkpoint from elsewhere).
  std::error_code ec;
  if ((!line.empty() || fs::is_directory(cfg_.checkpoint.dir, ec)) && (!recorded || *recorded != line))
    store.write_line(line);
  return chosen;
}

bool Trainer::stop_requested() {
  const double local = preemption_signal() != 0 ? 1.0 : 0.0;
  if (!ctx_.distributed()) return local > 0;
  const bool stop = stop_vote_.pending() && stop_vote_.wait() > 0;
  if (!stop) stop_vote_.start(local);
  return stop;
}

}  // namespace ddp
