// AveragedModel: torch/optim/swa_utils.py's update_parameters with get_ema_multi_avg_fn, parameters then buffers.
#include "train/averaged_model.h"

#include "checkpoint/checkpoint_entries.h"
#include "checkpoint/state_dict.h"

#include <torch/torch.h>

namespace ddp {
namespace {

// parameters() then buffers(), as itertools.chain(module.parameters(), module.buffers()).
std::vector<torch::Tensor> averaged_tensors(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out = m.parameters();
  for (const auto& b : m.buffers()) out.push_back(b);
  return out;
}

}  // namespace

AveragedModel::AveragedModel(std::shared_ptr<Classifier> average, double decay, EmaSchedule schedule)
    : average_(std::move(average)), decay_(decay), schedule_(schedule) {
  if (average_) average_->eval();  // only ever evaluated
}

void AveragedModel::step_ended(const torch::nn::Module& model, int64_t step_in_epoch, int64_t step) {
  // train.py: `if model_ema and i % args.model_ema_steps == 0`, i the epoch's 0-based iteration; then
  // `if epoch < args.lr_warmup_epochs: model_ema.n_averaged.fill_(0)`.
  if ((step_in_epoch - 1) % schedule_.every != 0) return;
  update(model);
  if (step <= schedule_.restart_through) n_averaged_ = 0;
}

void AveragedModel::update(const torch::nn::Module& model) {
  if (!average_) return;
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> ema = averaged_tensors(*average_), current = averaged_tensors(model);
  TORCH_CHECK(ema.size() == current.size(), "AveragedModel: the average and the model differ in their tensors");
  holds_weights_ = true;
  if (n_averaged_++ == 0) {
    for (size_t i = 0; i < ema.size(); ++i) ema[i].copy_(current[i]);
    return;
  }
  std::vector<torch::Tensor> ema_float, current_float;
  for (size_t i = 0; i < ema.size(); ++i) {
    if (ema[i].is_floating_point() || ema[i].is_complex()) {
      ema_float.push_back(ema[i]);
      current_float.push_back(current[i]);
    } else {
      ema[i].copy_(ema[i] * decay_ + current[i] * (1 - decay_));
    }
  }
  if (!ema_float.empty()) at::_foreach_lerp_(ema_float, current_float, 1 - decay_);
}

void AveragedModel::state_dict(c10::impl::GenericDict& out) const {
  if (!average_) return;
  out.insert("ema", module_state_entry(*average_));
  out.insert("ema_n_averaged", n_averaged_);
}

void AveragedModel::load_state_dict(const c10::impl::GenericDict& state) {
  if (!average_) return;
  const c10::IValue* tensors = ckpt_optional_entry(state, "ema");
  const c10::IValue* count = ckpt_optional_entry(state, "ema_n_averaged");
  if (!tensors || !count) {
    n_averaged_ = 0;
    holds_weights_ = false;
    return;
  }
  apply_state(*average_, tensor_dict(*tensors, "checkpoint entry \"ema\""), "checkpoint entry \"ema\"");
  n_averaged_ = ckpt_int_entry(*count, "ema_n_averaged");
  holds_weights_ = true;
}

}  // namespace ddp
