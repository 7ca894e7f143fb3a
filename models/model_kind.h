// ModelKind: one row per model.name, declared in the model's own file and listed once in models/registry.cpp: its
// config row and its factory.
#pragma once

#include "config/config.h"
#include "models/classifier.h"

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace ddp {

struct ModelKind {
  ModelRow row;  // what config loading reads: name, torchvision model, which keys apply
  // The model of cfg; parameters are initialised from the global CPU generator (seed it first).
  std::function<std::shared_ptr<Classifier>(const ModelConfig& cfg)> make;
};

// Every model kind, in the order --help lists model.name's names.
const std::vector<const ModelKind*>& model_kinds();

// The kind named `name`; throws std::invalid_argument for a name without one.
const ModelKind& model_kind(std::string_view name);

}  // namespace ddp
