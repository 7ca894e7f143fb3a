// The model rows: each model.name has exactly one row; the config accepts each and applies its flags; each built-in
// row's flags say what the model it builds is.
#include "config/config.h"
#include "models/batch_norm.h"
#include "models/model_kind.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>

namespace ddp::test {
namespace {

// What `row`'s own check says of synthetic images of `side` (any size), or nothing.
std::optional<BrokenRule> refused_side(const ModelRow& row, int64_t side) {
  if (!row.check) return std::nullopt;
  Config cfg = parse_config(
      "", "m.toml", {"model.name=resnet18", "data.dataset=synthetic", "data.image_size=" + std::to_string(side)});
  cfg.model.name = ModelChoice{std::string(row.name)};
  return row.check(cfg);
}

// The overrides a config needs for `row` alone to be its model: a file for a model that reads one, and synthetic
// 32x32 images unless its row refuses them (Net takes the default dataset's 28x28 ones only).
std::vector<std::string> overrides_for(const ModelRow& row) {
  std::vector<std::string> o{"model.name=" + std::string(row.name)};
  if (!row.path.empty()) o.push_back("model.path=m.pt");
  if (!row.library.empty()) o.push_back("model.library=m.so");
  if (!refused_side(row, 32)) o.insert(o.end(), {"data.dataset=synthetic", "data.image_size=32"});
  return o;
}

std::string config_error(std::vector<std::string> overrides, const std::vector<std::string>& more) {
  overrides.insert(overrides.end(), more.begin(), more.end());
  try {
    parse_config("", "m.toml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelRows, EveryNameHasExactlyOneRowAndTheConfigAppliesItsFlags) {
  std::set<std::string> names;
  int refusing = 0;  // rows whose check refuses 36x36 images
  for (const ModelKind* kind : model_kinds()) {
    const ModelRow& row = kind->row;
    SCOPED_TRACE(std::string(row.name));
    EXPECT_TRUE(names.insert(std::string(row.name)).second) << "two rows";
    EXPECT_EQ(&model_kind(row.name), kind);
    EXPECT_EQ(&model_row(row.name), &model_rows()[names.size() - 1]);
    EXPECT_TRUE(kind->make);
    EXPECT_FALSE(row.doc.empty());
    EXPECT_TRUE(row.torchvision.empty() || row.torchvision == "torchvision.models." + std::string(row.name));

    const std::vector<std::string> own = overrides_for(row);
    const Config cfg = parse_config("", "m.toml", own);
    EXPECT_EQ(cfg.model.name, row.name);
    EXPECT_NE(format_config(cfg).find("[model]\nname = \"" + std::string(row.name) + "\"\n"), std::string::npos);
    // model.path and model.library: read by the rows that say what they name, refused beside the others.
    for (const auto& [key, what, file] :
         {std::tuple{"model.path", row.path, "m.pt"}, std::tuple{"model.library", row.library, "m.so"}}) {
      const std::string k = key;
      if (what.empty())
        EXPECT_NE(config_error(own, {k + "=" + file}).find(k + " is"), std::string::npos);
      else
        EXPECT_NE(config_error({"model.name=" + std::string(row.name)}, {}).find("needs " + k), std::string::npos);
    }
    // model.reset_head: a model whose head is known takes it.
    const std::string reset = config_error(own, {"model.reset_head=true", "model.init_from=w.pt"});
    EXPECT_EQ(reset.empty(), row.head_known) << reset;
    // What the row's check refuses, the config refuses in its words: 36x36 images are not Net's 28x28 nor whole
    // 16x16 patches of a ViT.
    if (const std::optional<BrokenRule> broken = refused_side(row, 36)) {
      ++refusing;
      EXPECT_NE(config_error(own, {"data.dataset=synthetic", "data.image_size=36"}).find(broken->message),
                std::string::npos)
          << broken->message;
    }
    // training.cuda_graph's rules name model.name only for a model it cannot capture.
    const std::string graph = config_error(own, {"training.cuda_graph=true", "optimizer.fused=true"});
    EXPECT_EQ(graph.find("model.name") == std::string::npos, row.cuda_graph) << graph;
  }
  EXPECT_EQ(names.size(), model_names().size());
  EXPECT_EQ(model_rows().size(), model_kinds().size());
  EXPECT_GE(refusing, 2) << "net and vit_b_16 refuse 36x36 images";
}

// A built-in model (one that reads no file) is what its row says: BatchNorm layers where sync_batchnorm applies, a
// head module under head_name() where reset_head applies.
TEST(ModelRows, BuiltInModelsAreWhatTheirRowsSay) {
  for (const ModelKind* kind : model_kinds()) {
    const ModelRow& row = kind->row;
    if (row.reads_file()) continue;
    SCOPED_TRACE(std::string(row.name));
    ModelConfig cfg;
    cfg.name.name = std::string(row.name);
    torch::manual_seed(0);
    const std::shared_ptr<Classifier> model = make_model(cfg);
    EXPECT_EQ(count_batchnorm_layers(*model) > 0, row.batch_norm);
    bool head = false;
    for (const auto& item : model->named_modules()) head = head || item.key() == model->head_name();
    EXPECT_EQ(head, row.head_known);
  }
}

}  // namespace
}  // namespace ddp::test
