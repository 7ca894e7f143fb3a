// The [optimizer] keys that several optimizers take (momentum, nesterov, eps, weight_decay and its per-group values),
// each declared once with its range and default; an optimizer's row names them with its own doc.
#pragma once

#include "config/config.h"
#include "config/optimizer_rows.h"

#include <optional>

namespace ddp {

inline HyperparameterKey float_key(const Key& key, double default_value) { return {key, false, default_value}; }
inline HyperparameterKey bool_key(const Key& key, bool default_value) { return {key, true, default_value ? 1.0 : 0.0}; }

inline HyperparameterKey momentum_key(const char* doc) {
  return float_key(Key("momentum", doc).at_least(0).at_most(1), 0.0);
}
inline HyperparameterKey weight_decay_key(const char* doc) {
  return float_key(Key("weight_decay", doc).at_least(0).at_most(100), 0.0);
}
// norm_weight_decay and bias_weight_decay: torchvision's reference train.py --norm-weight-decay and
// --bias-weight-decay, the weight decay of set_weight_decay's "norm" and "bias" param groups; -1 = unset (no such
// group: those parameters stay in weight_decay's). Every optimizer that takes weight_decay takes both, after it.
inline HyperparameterKey norm_weight_decay_key() {
  return float_key(Key("norm_weight_decay",
                       "weight decay of the normalisation layers' parameters (BatchNorm, LayerNorm, GroupNorm, "
                       "InstanceNorm, LocalResponseNorm) in a param group of their own, as torchvision's "
                       "--norm-weight-decay")
                       .at_least(0)
                       .at_most(100)
                       .or_unset(-1, "unset: no norm group"),
                   -1.0);
}
inline HyperparameterKey bias_weight_decay_key() {
  return float_key(Key("bias_weight_decay",
                       "weight decay of every parameter named bias (a norm layer's too) in a param group of its own, "
                       "as torchvision's --bias-weight-decay")
                       .at_least(0)
                       .at_most(100)
                       .or_unset(-1, "unset: no bias group"),
                   -1.0);
}
inline HyperparameterKey nesterov_key() {
  return bool_key(Key("nesterov", "Nesterov momentum (needs momentum > 0)"), false);
}
// The rule of every optimizer taking nesterov: Nesterov momentum needs a momentum.
inline std::optional<BrokenRule> check_nesterov(const OptimizerConfig& cfg) {
  if (cfg.hyper.flag("nesterov") && cfg.hyper.number("momentum") <= 0)
    return BrokenRule{{"optimizer.nesterov", "optimizer.momentum"}, "optimizer.nesterov needs optimizer.momentum > 0"};
  return std::nullopt;
}
inline HyperparameterKey eps_key(const char* doc) { return float_key(Key("eps", doc).above(0).at_most(1), 1e-8); }

}  // namespace ddp
