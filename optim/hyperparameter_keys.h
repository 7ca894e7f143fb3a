// The [optimizer] keys that several optimizers take (momentum, eps, weight_decay), each declared once with its range
// and default; an optimizer's row names them with its own doc.
#pragma once

#include "config/optimizer_rows.h"

namespace ddp {

inline HyperparameterKey float_key(const Key& key, double default_value) { return {key, false, default_value}; }
inline HyperparameterKey bool_key(const Key& key, bool default_value) { return {key, true, default_value ? 1.0 : 0.0}; }

inline HyperparameterKey momentum_key(const char* doc) {
  return float_key(Key("momentum", doc).at_least(0).at_most(1), 0.0);
}
inline HyperparameterKey weight_decay_key(const char* doc) {
  return float_key(Key("weight_decay", doc).at_least(0).at_most(100), 0.0);
}
inline HyperparameterKey eps_key(const char* doc) { return float_key(Key("eps", doc).above(0).at_most(1), 1e-8); }

}  // namespace ddp
