// write_final_outputs: the files a finished run leaves in job.out_dir (model.pt and its company), replaced together.
#pragma once

#include "checkpoint/state_dict.h"

#include <functional>
#include <string>
#include <vector>

namespace ddp {

struct FinalOutputs {
  static constexpr const char* kModel = "model.pt";
  static constexpr const char* kEma = "model_ema.pt";
  static constexpr const char* kScripted = "model_scripted.pt";  // a TorchScript model's module
  // Every name a run's end may write into job.out_dir: the three above and the Hub files (HubFiles).
  static std::vector<std::string> names();
};

// What a run's end writes: the trained weights, the EMA's when there is one (`ema` not null), config.json's text, and
// a TorchScript model's module (`scripted` adds it to the set under the path it is given, or adds nothing).
struct FinalState {
  const NamedTensors& model;
  const NamedTensors* ema;
  std::string config_json;
  std::function<void(AtomicFileSet&, const std::string& path)> scripted;
};

// Writes `state` into OUT_DIR as one AtomicFileSet: every file is on disk before any replaces its previous version,
// model.pt last, and a file of FinalOutputs::names() this run does not write (model_ema.pt of an earlier run with an
// EMA, say) is removed, so the folder never holds one run's model.pt beside another run's other outputs. A failure
// leaves the previous model.pt as it was.
void write_final_outputs(const std::string& out_dir, const FinalState& state);

}  // namespace ddp
