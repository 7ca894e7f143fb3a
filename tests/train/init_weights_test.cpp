// model.reset_head: fine-tuning a torchvision ResNet saved with another number of classes loads every weight but
// the head's, and the head keeps the model's own initialisation; without it the head's shape is the error.
#include "checkpoint/state_dict.h"
#include "config/config.h"
#include "models/classifier.h"
#include "train/init_weights.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

TEST(InitWeights, ResetHeadLoadsAllButTheHeadOfATorchvisionResnet) {
  if (!python_has_modules("torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  TempDir dir;
  const CommandResult saved = save_torchvision_init(dir / "imagenet.pt", "resnet18", 1000, 4);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  ModelConfig cfg;
  cfg.name = ModelChoice{"resnet18"};
  cfg.in_channels = 3;
  cfg.num_classes = 7;
  torch::manual_seed(0);
  auto model = make_model(cfg);
  const NamedTensors fresh = module_state(*model);
  std::map<std::string, torch::Tensor> fresh_by_name;
  for (const auto& [name, t] : fresh) fresh_by_name[name] = t.clone();

  const std::string e = error_of([&] { load_init_weights(*model, cfg, dir / "imagenet.pt"); });
  EXPECT_NE(e.find("fc.weight"), std::string::npos) << e;

  cfg.reset_head = true;
  const std::string note = load_init_weights(*model, cfg, dir / "imagenet.pt");
  EXPECT_EQ(note, "fc re-initialised (2 of the file's entries left out)");
  const NamedTensors file = tensor_dict(read_torch_save_file(dir / "imagenet.pt"), "imagenet.pt");
  std::map<std::string, torch::Tensor> file_by_name(file.begin(), file.end());
  int loaded = 0;
  for (const auto& [name, t] : module_state(*model)) {
    if (name.rfind("fc.", 0) == 0) {
      EXPECT_TRUE(torch::equal(t, fresh_by_name.at(name))) << name;  // the model's own initialisation
    } else {
      EXPECT_TRUE(torch::equal(t, file_by_name.at(name))) << name;
      ++loaded;
    }
  }
  EXPECT_EQ(loaded + 2, static_cast<int>(file.size()));
}

TEST(InitWeights, ResetHeadNeedsInitFrom) {
  const std::string e = error_of([] { parse_config("[model]\nreset_head = true\n", "r.toml"); });
  EXPECT_NE(e.find("r.toml:2:14: model.reset_head re-initialises the head"), std::string::npos) << e;
}

}  // namespace
}  // namespace ddp::test
