// Trainer state: the checkpoint dict listed part by part, its checks, and restoring it.
#include "train/trainer.h"

#include "amp/grad_scaler.h"
#include "base/first_line.h"
#include "base/number_text.h"
#include "checkpoint/checkpoint_entries.h"
#include "checkpoint/config_snapshot.h"
#include "checkpoint/state_dict.h"
#include "distributed/gradient_sync.h"
#include "optim/optimizer_state.h"
#include "optim/param_state_access.h"

#include <algorithm>

namespace ddp {
namespace {

// 2: optimizer in torch.optim's state_dict() form; 1: its flat "<index>.<field>" layout (still read).
constexpr int64_t kFormatVersion = 2;

}  // namespace

c10::impl::GenericDict Trainer::state_dict() {
  // Entry order is the file's layout (docs/checkpoints.md): torch.load users see the same dict as ever.
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  // Rank 0 alone serialises a checkpoint: the copies of the weights and of the optimizer's state (from a GPU, over
  // PCIe into pinned memory) are made there only.
  const bool copies = ctx_.is_main();
  out.insert("format_version", kFormatVersion);
  if (copies) {
    out.insert("model", module_state_entry(*model_));
    out.insert("optimizer_name", cfg_.optimizer.name.name);
    out.insert("optimizer", optimizer_state_dict(*optimizer_));
    out.insert("scaler", scaler_->state_dict());  // empty when loss scaling is off, as Python's disabled GradScaler
  }
  state_.state_dict(out);
  generators_.state_dict(out);      // collective
  if (copies) ema_->state_dict(out);  // nothing when training.ema_decay is 0
  gradient_sync_->state_dict(out);  // collective; nothing for a world of one
  reporter_.state_dict(out);        // rank 0's MLflow run, when there is one
  add_config_snapshot(out, cfg_);
  return out;
}

std::string Trainer::check_state_dict(const c10::impl::GenericDict& state) const {
  try {
    TrainState::check_state_dict(state, dataset_.train.size());
    // Weights a diverged run saved are no place to continue from: auto-resume passes over them to an older file.
    for (const auto& [name, t] : ckpt_model_entry(state))
      if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>())
        throw std::runtime_error("checkpoint entry \"model\": " + name + " holds values that are not finite");
    RankGenerators::check_state_dict(state);
    if (const c10::IValue* scaler = ckpt_optional_entry(state, "scaler"))
      GradScaler::check_state_dict(ckpt_dict_entry(*scaler, "scaler"));
  } catch (const std::exception& e) {
    return first_line(e.what());
  }
  return "";
}

void Trainer::load_state_dict(const c10::impl::GenericDict& state) {
  const c10::IValue* version_entry = ckpt_optional_entry(state, "format_version");
  const int64_t version = version_entry ? ckpt_int_entry(*version_entry, "format_version") : kFormatVersion;
  if (version != 1 && version != kFormatVersion)
    throw std::runtime_error("checkpoint format_version " + std::to_string(version) +
                             " is not supported (expected 1 or " + std::to_string(kFormatVersion) + ")");
  const std::string problem = check_state_dict(state);
  if (!problem.empty()) throw std::runtime_error(problem);
  apply_state(*model_, ckpt_model_entry(state), "checkpoint");
  load_optimizer_entry(state, version);
  // A checkpoint written without loss scaling (bfloat16, amp off, or Python without a GradScaler) has an empty or no
  // "scaler": where this run scales the loss, its scaler starts afresh, and the user is told (Python's
  // GradScaler.load_state_dict refuses an empty state).
  const c10::IValue* scaler_state = ckpt_optional_entry(state, "scaler");
  if (scaler_state && ckpt_dict_entry(*scaler_state, "scaler").size() > 0) {
    scaler_->load_state_dict(ckpt_dict_entry(*scaler_state, "scaler"));  // a disabled scaler ignores it
  } else if (scaler_->enabled()) {
    reporter_.warning(
        "the checkpoint holds no loss scaler state (written without float16 loss scaling): the scale "
        "starts at amp.init_scale = " +
        shortest_number(cfg_.amp.init_scale));
  }
  const std::string reshard = state_.load_state_dict(
      state, [this](int64_t world, int64_t batch) { return steps_per_epoch(world, batch); },
      cfg_.training.grad_accum_steps);
  if (!reshard.empty()) reporter_.warning(reshard);
  generators_.load_state_dict(state, state_.global_step);  // absent states: seeded from job.seed, rank and step
  ema_->load_state_dict(state);
  if (const std::string kept = gradient_sync_->load_state_dict(state); !kept.empty()) reporter_.warning(kept);
  reporter_.load_state_dict(state);
  if (!written_with(state, cfg_)) reporter_.warning("the config differs from the one the checkpoint was written with");
}

void Trainer::load_optimizer_entry(const c10::impl::GenericDict& state, int64_t format_version) {
  const auto opt_state = ckpt_dict_entry(ckpt_required_entry(state, "optimizer"), "optimizer");
  const c10::IValue* name_entry = ckpt_optional_entry(state, "optimizer_name");
  if (name_entry && !name_entry->isString()) ckpt_wrong_entry_type("optimizer_name", *name_entry, "a str");
  std::vector<std::string> written_with;  // the optimizers the checkpoint allows: its entry's, or param_groups'
  if (name_entry)
    written_with = {name_entry->toStringRef()};
  else
    written_with = optimizers_from_param_groups(opt_state);
  if (written_with.empty())
    throw std::runtime_error("checkpoint entry \"optimizer\" is not the state_dict() of " +
                             std::string(optimizer_name_doc()) +
                             " (no optimizer takes the keys of its param_groups[0])");
  const std::string& asked = cfg_.optimizer.name.name;
  if (std::find(written_with.begin(), written_with.end(), asked) == written_with.end())
    throw std::runtime_error("checkpoint was written with optimizer " + join(written_with, " or ") +
                             ", config asks for " + asked);
  // torch.optim's load_state_dict refuses another number or size of param groups. Where the checkpoint's groups hold
  // as many parameters in all as the optimizer's, the groups were split otherwise; format 1 had one group.
  std::string layout;
  bool same_parameters = true;
  if (format_version != 1) {
    layout = param_group_layout_difference(*optimizer_, opt_state);
    size_t listed = 0;
    for (size_t n : param_group_sizes(opt_state)) listed += n;
    same_parameters = listed == optimizer_params(*optimizer_).size();
  } else if (optimizer_->param_groups().size() != 1) {
    layout = "a format 1 checkpoint's optimizer has 1 param group, the optimizer has " +
             std::to_string(optimizer_->param_groups().size());
  }
  if (!layout.empty() && !same_parameters) throw std::runtime_error(layout);
  if (!layout.empty()) {
    const auto value = [&](const char* key) {
      const double v = cfg_.optimizer.hyper.number(key);
      return std::string("optimizer.") + key + " = " + shortest_number(v) + (v < 0 ? " (unset)" : "");
    };
    throw std::runtime_error(layout + ": " + value("norm_weight_decay") + " and " + value("bias_weight_decay") +
                             " group the parameters otherwise than the run that wrote the checkpoint "
                             "(torchvision's set_weight_decay); resume with the values it was written with");
  }
  if (format_version == 1) {
    load_flat_optimizer_state_dict(*optimizer_, opt_state);
    return;
  }
  const std::vector<std::string> differences = load_optimizer_state_dict(*optimizer_, opt_state);
  if (!differences.empty())
    reporter_.warning("the checkpoint's optimizer param_groups differ from the config, whose values are used: " +
                      join(differences));
}

}  // namespace ddp
