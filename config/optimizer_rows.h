// What config loading reads of each optimizer: its optimizer.name, the [optimizer] keys it takes and its rules across
// them. Each optimizer declares its row beside its update rule in optim/; optim/registry.cpp lists the rows once, and
// the program hands them down (config/kind_rows.h), so config/ learns of a new optimizer without naming it.
#pragma once

#include "config/key.h"
#include "config/row_choice.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

struct OptimizerConfig;

// One [optimizer] hyperparameter an optimizer takes: a float or a bool key. Optimizers that share a key (momentum,
// eps, weight_decay) declare it alike; its doc may differ per optimizer.
struct HyperparameterKey {
  Key key;
  bool flag = false;         // a bool key (true) or a float key (false)
  double default_value = 0;  // a bool key's: 0 (false) or 1 (true)
};

struct OptimizerKeyRow {
  std::string_view name;        // optimizer.name
  std::string_view torch_name;  // what it is in torch.optim ("torch.optim.RMSprop")
  std::vector<HyperparameterKey> keys;
  bool has_fused = false;        // torch.optim has a fused=True implementation of it (optimizer.fused)
  bool steps_on_device = false;  // with optimizer.fused, its step takes lr and found_inf on the device (cuda_graph)
  std::function<std::optional<BrokenRule>(const OptimizerConfig&)> check;  // rules across its own keys, or null
};

// Every optimizer's row, in the order --help lists the names (the rows handed down: config/kind_rows.h).
const std::vector<OptimizerKeyRow>& optimizer_rows();

// The row of optimizer.name `name`; throws std::logic_error for a name without one (the config refused it before).
const OptimizerKeyRow& optimizer_row(std::string_view name);

// optimizer.name's names in row order.
std::vector<std::string> optimizer_names();
template <>
inline std::vector<std::string> row_names<OptimizerKeyRow>() {
  return optimizer_names();
}

// Every hyperparameter key of every row, once each, in the order the rows first declare them; its doc names the
// optimizers that take it ("sgd, rmsprop: momentum factor"). Throws std::logic_error where two rows declare one key
// with different types, ranges or defaults.
const std::vector<HyperparameterKey>& hyperparameter_keys();

// optimizer.name's doc: what each name is in torch.optim.
const char* optimizer_name_doc();

// optimizer.name: a name of optimizer_rows().
using OptimizerChoice = RowChoice<OptimizerKeyRow>;

// The values of the hyperparameter keys, by key name; every key of hyperparameter_keys() is present from construction.
struct Hyperparameters {
  std::map<std::string, double, std::less<>> numbers;
  std::map<std::string, bool, std::less<>> flags;

  Hyperparameters();
  double number(std::string_view key) const;
  bool flag(std::string_view key) const;
  void set(std::string_view key, double value);
  void set(std::string_view key, bool value);
  // The field of key `h`, for the config's key walk.
  double& number_field(const HyperparameterKey& h) { return numbers.at(h.key.name); }
  const double& number_field(const HyperparameterKey& h) const { return numbers.at(h.key.name); }
  bool& flag_field(const HyperparameterKey& h) { return flags.at(h.key.name); }
  const bool& flag_field(const HyperparameterKey& h) const { return flags.at(h.key.name); }
};

}  // namespace ddp
