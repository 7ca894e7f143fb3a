// GradScaler: scale / unscale / step / update of torch.amp.GradScaler, on ATen's AMP kernels for every device.
#include "amp/grad_scaler.h"

#include "base/foreach.h"

#include <algorithm>
#include <cmath>

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

GradScaler::GradScaler(const AmpConfig& amp, bool enabled, ReduceFoundInf reduce_found_inf)
    : options_(amp), enabled_(enabled), reduce_found_inf_(std::move(reduce_found_inf)) {
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
  struct PerDevice {
    c10::Device device;
    torch::Tensor found_inf, inv_scale;
  };
  std::vector<PerDevice> devices;
  for (const auto& indices : group_by_device_and_dtype(grads)) {
    const std::vector<torch::Tensor> group = pick(grads, indices);
    const c10::Device device = group.front().device();
    auto d = std::find_if(devices.begin(), devices.end(), [&](const PerDevice& e) { return e.device == device; });
    if (d == devices.end())
      d = devices.insert(devices.end(),
                         {device, torch::zeros({1}, torch::dtype(torch::kFloat).device(device)), inv_scale.to(device)});
    at::_amp_foreach_non_finite_check_and_unscale_(group, d->found_inf, d->inv_scale);
  }
  torch::Tensor found_inf = torch::zeros({1}, scale_.options());
  for (const PerDevice& d : devices) found_inf.add_(d.found_inf.to(scale_.device()));
  st.local_found_inf = found_inf.item<double>();
  if (reduce_found_inf_) found_inf.fill_(reduce_found_inf_(st.local_found_inf));
  st.found_inf = found_inf;
  st.stage = Stage::kUnscaled;
}

void GradScaler::set_found_inf(torch::optim::Optimizer& opt, double value) {
  if (!enabled_) return;
  OptimizerState& st = state_of(opt);
  if (st.stage != Stage::kUnscaled)
    throw std::logic_error("set_found_inf() needs unscale() on this optimizer first, and no step() yet.");
  st.found_inf.fill_(value);
}

bool GradScaler::step(torch::optim::Optimizer& opt) {
  if (!enabled_) {
    opt.step();
    return true;
  }
  check_initialised("step");
  if (state_of(opt).stage == Stage::kStepped)
    throw std::logic_error("step() has already been called since the last update().");
  if (state_of(opt).stage == Stage::kReady) unscale(opt);
  OptimizerState& st = state_of(opt);
  const bool run = st.found_inf.item<double>() == 0.0;
  if (run) {
    opt.step();
  } else {
    ++skipped_steps_;
  }
  st.stage = Stage::kStepped;
  return run;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_initialised("update");
  torch::Tensor combined;
  for (auto& [opt, st] : per_optimizer_) {
    if (!st.found_inf.defined()) continue;
    torch::Tensor f = st.found_inf.to(scale_.device());
    combined = combined.defined() ? combined + f : f.clone();
  }
  if (!combined.defined()) throw std::logic_error("No inf checks were recorded prior to update().");
  at::_amp_update_scale_(scale_, growth_tracker_, combined, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_initialised("update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

bool GradScaler::found_inf() const {
  double total = 0.0;
  for (const auto& [opt, st] : per_optimizer_)
    if (st.found_inf.defined()) total += st.found_inf.item<double>();
  return total != 0.0;
}

bool GradScaler::local_found_inf() const {
  for (const auto& [opt, st] : per_optimizer_)
    if (st.local_found_inf != 0.0) return true;
  return false;
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
                    (key == "_growth_tracker"   ? x >= 0 && x <= 1e9
                     : key == "growth_interval" ? x >= 1 && x <= 1e9
                                                : x > 0);
    if (!ok) throw std::runtime_error("checkpoint entry \"scaler\" field \"" + key + "\" is out of range");
  }
}

}  // namespace ddp
