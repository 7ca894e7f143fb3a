// Tests: Classifier::min_training_batch says exactly when a one-sample training forward fails (ResNet's BatchNorm).
#include "config/config.h"
#include "models/classifier.h"
#include "tests/models/torchvision_cnn_names.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace ddp {
namespace {

// Whether a train-mode forward of one image of side `size` runs (LibTorch refuses BatchNorm over one value).
bool one_sample_trains(Classifier& model, int64_t size) {
  model.train();
  try {
    model.forward(torch::zeros({1, 1, size, size}));
    return true;
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Expected more than 1 value per channel when training"), std::string::npos)
        << e.what();
    return false;
  }
}

TEST(MinTrainingBatch, MatchesWhatAOneSampleForwardDoes) {
  std::vector<std::string> names = {"net", "resnet18", "resnet50"};
  names.insert(names.end(), test::kTorchvisionCnns.begin(), test::kTorchvisionCnns.end());
  for (const std::string& name : names) {
    ModelConfig cfg;
    cfg.name = ModelChoice{name};
    auto model = make_model(cfg);
    // net takes 28x28 only; the others' last BatchNorm map is ceil(size / 32) wide: 1x1 up to 32, 2x2 from 33.
    for (int64_t size : name == "net" ? std::vector<int64_t>{28} : std::vector<int64_t>{16, 28, 32, 33}) {
      SCOPED_TRACE(name + " at " + std::to_string(size));
      const bool trains = one_sample_trains(*model, size);
      EXPECT_EQ(model->min_training_batch(size), trains ? 1 : 2);
      if (name != "net") {
        EXPECT_EQ(trains, size > 32);
      }
    }
  }
}

}  // namespace
}  // namespace ddp
