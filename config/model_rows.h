// What config loading reads of each model: its model.name, the torchvision model it matches and which keys apply to
// it. Each model declares its row beside its factory in models/; models/registry.cpp lists the rows once, and the
// program hands them down (config/kind_rows.h), so config/ learns of a new model without naming it.
#pragma once

#include "config/row_choice.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

struct Config;

struct ModelRow {
  std::string_view name;         // model.name
  std::string_view torchvision;  // the torchvision model it matches ("torchvision.models.resnet50"); "" for none
  std::string_view doc;          // what model.name's doc says of it; rows with one doc share it ("resnet18, ...: ...")
  bool batch_norm = false;       // BatchNorm layers model.sync_batchnorm converts (torch.nn.SyncBatchNorm)
  bool cuda_graph = true;        // training.cuda_graph may capture its forward (static shapes, no host reads)
  bool head_known = true;        // its classifier head is known, so model.reset_head applies
  std::string_view path;         // what model.path must name for it ("the module torch.jit.save wrote"); "": none
  double dropout = -1;           // model.dropout when unset (torchvision's default); -1: the model has no dropout
  double stochastic_depth = -1;  // model.stochastic_depth when unset; -1: the model has no stochastic depth
  std::string_view library{};    // what model.library must name for it ("a plugin library"); "": none
  // What the model refuses of a config beyond the rules above (the image sizes its layers are built for), and why;
  // null: nothing.
  std::function<std::optional<BrokenRule>(const Config&)> check{};

  // Whether the model is read from a file the config names (model.path, model.library), not built in.
  bool reads_file() const { return !path.empty() || !library.empty(); }
};

// Every model's row, in the order --help lists the names (the rows handed down: config/kind_rows.h).
const std::vector<ModelRow>& model_rows();

// The row of model.name `name`; throws std::logic_error for a name without one (the config refused it before).
const ModelRow& model_row(std::string_view name);

// model.name's names in row order.
std::vector<std::string> model_names();
template <>
inline std::vector<std::string> row_names<ModelRow>() {
  return model_names();
}

// model.name's doc: each row's doc after the names that give it.
const char* model_name_doc();
// model.sync_batchnorm's doc: the models whose BatchNorm it converts.
const char* sync_batchnorm_doc();

// The image sides a model is shown, each with the key that sets it: data.image_size, and data.train_crop_size and
// data.val_crop_size (0 when unset: data.image_size's side then).
struct ImageSide {
  const char* key;
  int64_t value;
};
std::vector<ImageSide> image_sides(const Config& cfg);

// model.name: a name of model_rows().
using ModelChoice = RowChoice<ModelRow>;

}  // namespace ddp
