// Tests: files from our save_state_dict load in Python with torch.load into torchvision / Python models, strict.
#include "config/config.h"
#include "checkpoint/state_dict.h"
#include "models/classifier.h"
#include "tests/checkpoint/state_dict_oracle.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

// Saves `model`'s state, has Python load it (strict=True) into `python_model` and compares what Python holds.
void expect_python_loads_bit_exact(Classifier& model, const std::string& python_model) {
  TempDir dir;
  save_state_dict(dir / "model.pt", module_state(model));
  run_oracle("load-into " + python_model + " " + shell_quote(dir / "model.pt") + " " + shell_quote(dir / "python"));
  EXPECT_EQ(bitwise_difference(read_dump(dir / "python"), module_state(model)), "");
}

TEST(StateDictPythonSave, ResNet18LoadsIntoTorchvisionResNet18Strict) {
  SKIP_WITHOUT_PYTHON_TORCH();
  torch::manual_seed(21);
  ModelConfig cfg;
  cfg.name = ModelChoice{"resnet18"};
  auto model = make_model(cfg);
  {
    torch::NoGradGuard no_grad;
    model->train();
    model->forward(torch::randn({2, 1, 28, 28}));  // BN running stats and num_batches_tracked move off their init
  }
  expect_python_loads_bit_exact(*model, "resnet18");
}

TEST(StateDictPythonSave, NetLoadsIntoPythonNetStrict) {
  SKIP_WITHOUT_PYTHON_TORCH();
  torch::manual_seed(22);
  ModelConfig cfg;
  cfg.name = ModelChoice{"net"};
  auto model = make_model(cfg);
  expect_python_loads_bit_exact(*model, "net");
}

}  // namespace
}  // namespace ddp::test
