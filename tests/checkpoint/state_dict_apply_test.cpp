// Tests: save/load round trip of our own files and the one strict-apply error listing every mismatched key.
#include "config/config.h"
#include "checkpoint/state_dict.h"
#include "models/classifier.h"
#include "tests/checkpoint/state_dict_oracle.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

std::shared_ptr<Classifier> model_named(const std::string& name) {
  ModelConfig cfg;
  cfg.name = ModelChoice{name};
  return make_model(cfg);
}

TEST(StateDictApply, OwnSaveLoadsBackBitExact) {
  torch::manual_seed(31);
  auto model = model_named("resnet18");
  {
    torch::NoGradGuard no_grad;
    model->forward(torch::randn({2, 1, 28, 28}));
  }
  TempDir dir;
  save_state_dict(dir / "model.pt", module_state(*model));
  NamedTensors loaded = load_state_dict_file(dir / "model.pt");
  EXPECT_EQ(bitwise_difference(module_state(*model), loaded), "");
}

TEST(StateDictApply, MismatchIsOneErrorListingMissingUnexpectedAndMisshapedKeysWithTheFile) {
  torch::manual_seed(32);
  auto source = model_named("net");
  NamedTensors state;
  for (const auto& [name, t] : module_state(*source)) {
    if (name == "fc2.bias") continue;                                             // missing
    state.emplace_back(name, name == "conv1.weight" ? torch::zeros({10, 3, 5, 5}) : t);  // mis-shaped
  }
  state.emplace_back("fc3.weight", torch::zeros({4}));  // unexpected
  TempDir dir;
  const std::string path = dir / "bad.pt";
  save_state_dict(path, state);

  auto target = model_named("net");
  const NamedTensors before = module_state(*target);
  std::vector<at::Tensor> before_values;
  for (const auto& [_, t] : before) before_values.push_back(t.clone());
  try {
    apply_state(*target, load_state_dict_file(path), path);
    FAIL() << "apply_state accepted a mismatched state dict";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing keys: fc2.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected keys: fc3.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("conv1.weight (file [10, 3, 5, 5], model [10, 1, 5, 5])"), std::string::npos) << msg;
  }
  // Nothing was copied: the model is as it was.
  NamedTensors after = module_state(*target);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].second.equal(before_values[i])) << after[i].first;
}

TEST(StateDictApply, PythonResNetStateIntoNetNamesTheKeys) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  run_oracle("save resnet18 " + shell_quote(dir / "r.pt") + " " + shell_quote(dir / "r"));
  auto net = model_named("net");
  try {
    apply_state(*net, load_state_dict_file(dir / "r.pt"), dir / "r.pt");
    FAIL() << "a ResNet state dict applied into Net";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir / "r.pt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing keys: conv1.bias, conv2.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected keys: bn1.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("conv1.weight (file [64, 1, 7, 7], model [10, 1, 5, 5])"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ddp::test
