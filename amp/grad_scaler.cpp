// GradScaler: scale / unscale / step / update of torch.amp.GradScaler, on ATen's AMP kernels for every device.
#include "amp/grad_scaler.h"

#include "base/foreach.h"
#include "base/capturable_step.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include <stdexcept>

namespace ddp {
namespace {

double number(const c10::impl::GenericDict& state, const std::string& key) {
  if (!state.contains(c10::IValue(key))) throw std::invalid_argument("GradScaler state_dict has no '" + key + "'");
  const c10::IValue v = state.at(c10::IValue(key));
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  throw std::invalid_argument("GradScaler state_dict '" + key + "' is not a number");
}

}  // namespace

GradScaler::GradScaler(const AmpConfig& amp, bool enabled) : options_(amp), enabled_(enabled) {
  if (enabled_) {
    if (!(options_.growth_factor > 1.0)) throw std::invalid_argument("The growth factor must be > 1.0.");
    if (!(options_.backoff_factor < 1.0)) throw std::invalid_argument("The backoff factor must be < 1.0.");
  }
}

void GradScaler::check_initialised(const char* what) const {
  if (!scale_.defined())
    throw std::logic_error(std::string("GradScaler: attempted ") + what +
                           " but the scale is not initialised; call scale(loss) earlier in the iteration");
}

GradScaler::OptimizerState& GradScaler::state_of(torch::optim::Optimizer& opt) { return per_optimizer_[&opt]; }

torch::Tensor GradScaler::scale(const torch::Tensor& loss) {
  if (!enabled_) return loss;
  if (!scale_.defined()) {
    const auto device = loss.device();
    scale_ = torch::full({1}, options_.init_scale, torch::dtype(torch::kFloat).device(device));
    growth_tracker_ = torch::full({1}, init_growth_tracker_, torch::dtype(torch::kInt).device(device));
  }
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

void GradScaler::unscale(torch::optim::Optimizer& opt) {
  if (!enabled_) return;
  check_initialised("unscale");
  OptimizerState& st = state_of(opt);
  if (st.stage == Stage::kUnscaled)
    throw std::logic_error("unscale() has already been called on this optimizer since the last update().");
  if (st.stage == Stage::kStepped) throw std::logic_error("unscale() is being called after step().");

  torch::NoGradGuard no_grad;
  // FP32 division can be imprecise for certain compile options, so the reciprocal is taken in FP64 (as Python).
  const torch::Tensor inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  std::vector<torch::Tensor> grads;
  for (auto& group : opt.param_groups()) {
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (p.grad().scalar_type() == torch::kHalf) throw std::invalid_argument("Attempting to unscale FP16 gradients.");
      grads.push_back(p.grad().is_sparse() ? p.grad()._values() : p.grad());
    }
  }
  // Gradients grouped by device and dtype; one found_inf (and inv_scale copy) per device, as Python's _unscale_grads_.
  std::vector<std::pair<c10::Device, torch::Tensor>> inv_scale_per_device;
  st.found_inf_per_device.clear();
  for (const auto& indices : group_by_device_and_dtype(grads)) {
    const std::vector<torch::Tensor> group = pick(grads, indices);
    const c10::Device device = group.front().device();
    auto d = std::find_if(inv_scale_per_device.begin(), inv_scale_per_device.end(),
                          [&](const auto& e) { return e.first == device; });
    if (d == inv_scale_per_device.end()) {
      d = inv_scale_per_device.insert(inv_scale_per_device.end(), {device, inv_scale.to(device)});
      st.found_inf_per_device.push_back(torch::zeros({1}, torch::dtype(torch::kFloat).device(device)));
    }
    at::_amp_foreach_non_finite_check_and_unscale_(
        group, st.found_inf_per_device[static_cast<size_t>(d - inv_scale_per_device.begin())], d->second);
  }
  // An optimizer without gradients found nothing: its found_inf is a zero on the scale's device.
  if (st.found_inf_per_device.empty()) st.found_inf_per_device.push_back(torch::zeros({1}, scale_.options()));
  st.stage = Stage::kUnscaled;
}

void GradScaler::step(torch::optim::Optimizer& opt) {
  if (!enabled_) {
    opt.step();
    return;
  }
  check_initialised("step");
  if (state_of(opt).stage == Stage::kStepped)
    throw std::logic_error("step() has already been called since the last update().");
  if (state_of(opt).stage == Stage::kReady) unscale(opt);
  OptimizerState& st = state_of(opt);
  st.stage = Stage::kStepped;
  if (auto* takes = dynamic_cast<CapturableStep*>(&opt); takes && takes->capturable()) {
    // torch.amp.GradScaler.step with _step_supports_amp_scaling, the gradients already unscaled: found_inf summed
    // on the scale's device and handed to the optimizer, which skips on the device.
    torch::Tensor found = st.found_inf_per_device.front().to(scale_.device(), /*non_blocking=*/true);
    for (size_t i = 1; i < st.found_inf_per_device.size(); ++i)
      found = found + st.found_inf_per_device[i].to(scale_.device(), /*non_blocking=*/true);
    takes->step_unless_found_inf(found);
    if (skipped_on_device_.defined())
      skipped_on_device_.add_(found);
    else
      skipped_on_device_ = found.clone();
    return;
  }
  // torch.amp.GradScaler._maybe_opt_step: sum(v.item() for v in found_inf_per_device.values()).
  double found = 0.0;
  for (const auto& f : st.found_inf_per_device) found += f.item<double>();
  st.found_inf = found != 0.0;
  if (*st.found_inf)
    ++skipped_steps_;
  else
    opt.step();
}

void GradScaler::update() {
  if (!enabled_) return;
  check_initialised("update");
  torch::Tensor combined;
  for (auto& [opt, st] : per_optimizer_)
    for (const auto& f : st.found_inf_per_device) {
      torch::Tensor here = f.to(scale_.device(), /*non_blocking=*/true);
      combined = combined.defined() ? combined + here : here;
    }
  if (!combined.defined()) throw std::logic_error("No inf checks were recorded prior to update().");
  at::_amp_update_scale_(scale_, growth_tracker_, combined, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  per_optimizer_.clear();
}

bool GradScaler::found_inf() const {
  for (const auto& [opt, st] : per_optimizer_) {
    if (st.found_inf) {
      if (*st.found_inf) return true;
      continue;
    }
    for (const auto& f : st.found_inf_per_device)
      if (f.item<double>() != 0.0) return true;
  }
  return false;
}

int64_t GradScaler::skipped_steps() const {
  return skipped_steps_ + (skipped_on_device_.defined() ? static_cast<int64_t>(skipped_on_device_.item<double>()) : 0);
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale;
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : init_growth_tracker_;
}

c10::impl::GenericDict GradScaler::state_dict() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  if (!enabled_) return d;
  d.insert("scale", get_scale());
  d.insert("growth_factor", options_.growth_factor);
  d.insert("backoff_factor", options_.backoff_factor);
  d.insert("growth_interval", options_.growth_interval);
  d.insert("_growth_tracker", growth_tracker());
  return d;
}

void GradScaler::load_state_dict(const c10::impl::GenericDict& state) {
  if (!enabled_) return;
  if (state.size() == 0)
    throw std::runtime_error(
        "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  options_.init_scale = number(state, "scale");
  if (scale_.defined()) scale_.fill_(options_.init_scale);
  options_.growth_factor = number(state, "growth_factor");
  options_.backoff_factor = number(state, "backoff_factor");
  options_.growth_interval = static_cast<int64_t>(number(state, "growth_interval"));
  init_growth_tracker_ = static_cast<int64_t>(number(state, "_growth_tracker"));
  if (growth_tracker_.defined()) growth_tracker_.fill_(init_growth_tracker_);
}

void GradScaler::check_state_dict(const c10::impl::GenericDict& state) {
  for (const auto& item : state) {
    const c10::IValue& v = item.value();
    const double x = v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : 0.0;
    const std::string key = item.key().isString() ? item.key().toStringRef() : "?";
    const bool ok = (v.isDouble() || v.isInt()) && std::isfinite(x) &&
                    (key == "_growth_tracker"   ? x >= 0 && x <= std::numeric_limits<int32_t>::max()
                     : key == "growth_interval" ? x >= 1 && x <= kMaxSteps
                                                : x > 0);
    if (!ok) throw std::runtime_error("checkpoint entry \"scaler\" field \"" + key + "\" is out of range");
  }
}

}  // namespace ddp
