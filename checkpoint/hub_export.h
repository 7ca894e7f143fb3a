// The output folder as a Hugging Face Hub model repository: model.safetensors (and model_ema.safetensors) beside
// model.pt, and a config.json saying what the weights are and how their inputs are made.
#pragma once

#include "checkpoint/state_dict.h"
#include "config/config.h"

#include <string>
#include <vector>

namespace ddp {

// What config.json says of a run's model beyond its config: its class names by label (image folders; empty
// otherwise) and its head module (Classifier::head_name; empty when unknown).
struct ModelCard {
  std::vector<std::string> classes;
  std::string head;
};

// config.json in timm's layout (timm/models/_hub.py save_config_for_hf: architecture, num_classes, label_names,
// pretrained_cfg with input_size, interpolation, mean, std, crop_pct, crop_mode, classifier), plus in_chans and
// the torchvision model the weights load into.
std::string hub_config_json(const Config& cfg, const ModelCard& card);

// The names of the files write_hub_files writes into OUT: the model's weights, the EMA's, config.json.
struct HubFiles {
  static constexpr const char* kModel = "model.safetensors";
  static constexpr const char* kEma = "model_ema.safetensors";
  static constexpr const char* kConfig = "config.json";
};

// Adds OUT/model.safetensors (`model`), OUT/model_ema.safetensors (`ema`, when not null) and OUT/config.json to
// `files`.
void write_hub_files(AtomicFileSet& files, const std::string& out_dir, const NamedTensors& model,
                     const NamedTensors* ema, const std::string& config_json);

}  // namespace ddp
