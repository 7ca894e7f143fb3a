// ddptrain's torchvision CNNs (models/mobilenet_v3.cpp, efficientnet_v2.cpp, regnet.cpp) against torchvision: its
// state dict loads strictly and gives its eval forward, ddptrain's loads strictly into torchvision with the
// distributions of its init, and two ranks train as Python DDP does.
#include "base/number_text.h"
#include "checkpoint/state_dict.h"
#include "config/config.h"
#include "models/classifier.h"
#include "tests/models/torchvision_cnn_names.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"
#include "train/init_weights.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

namespace ddp::test {
namespace {

std::string reference_script() { return source_dir() + "/tests/python/torchvision_models_reference.py"; }

ModelConfig three_channel_config(const std::string& name) {
  ModelConfig cfg;
  cfg.name = ModelChoice{name};
  cfg.in_channels = 3;
  cfg.num_classes = 10;
  return cfg;
}

torch::Tensor entry_named(const NamedTensors& state, const std::string& name) {
  for (const auto& [key, t] : state)
    if (key == name) return t;
  ADD_FAILURE() << "no entry " << name;
  return {};
}

class TorchvisionCnn : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torch, torchvision";
  }
};

// torchvision's state dict (its BatchNorm statistics, affines, biases and head moved off their init) goes in through
// model.init_from's loader, strictly, and the forward on 2x3x32x32 inputs is torchvision's within 1e-5, with the
// default kernels (padding-only taps left out: the last stages' maps are 1x1) and in channels_last, in eval mode; and
// in train mode (batch statistics; the row's default dropout and stochastic depth drawing the same masks as
// torchvision's from the same seed of the default generator) with the default kernels, those PyTorch runs. Not in
// channels_last: BatchNorm over two samples' 1x1 maps magnifies the other summation order, PyTorch's own train-mode
// output moves by 0.18 between its NCHW and channels_last RegNet there.
// Why 1e-5: with the default kernels both sides run the same ATen kernels on the same inputs in the same order (a
// skipped padding tap only leaves out products with zero, which change no float sum), so the outputs agree exactly:
// 0 measured on the AVX2 and the plain paths, in both modes. In channels_last the convolutions sum each output's
// products in another blocking, a rounding difference of a few float32 units (u = 2^-24 = 6e-8) of each layer's
// output that batch normalisation keeps from growing with depth: 0.9-4.5e-7 measured on outputs of magnitude
// 0.24-1.25 on AVX2, 1.0-6.6e-7 on the plain path, 15x under the bound. A wrong weight, a missed BatchNorm statistic
// or a wrong activation moves outputs by 1e-2 and more.
TEST_P(TorchvisionCnn, LoadsTorchvisionsStateDictAndGivesItsForward) {
  TempDir dir;
  const CommandResult r = run_command(python() + " " + reference_script() + " fresh --model " + GetParam() +
                                      " --seed 7 --size 32 --out-dir " + shell_quote(dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const NamedTensors io = load_state_dict_file(dir / "io.pt");
  const torch::Tensor x = entry_named(io, "x");
  for (const MemoryFormat format : {MemoryFormat::Auto, MemoryFormat::ChannelsLast}) {
    ModelConfig cfg = three_channel_config(GetParam());
    cfg.memory_format = format;
    const std::shared_ptr<Classifier> model = make_model(cfg);
    EXPECT_EQ(load_init_weights(*model, cfg, dir / "torchvision.pt"), "");
    torch::NoGradGuard no_grad;
    for (const bool training : {false, true}) {
      if (training && format != MemoryFormat::Auto) continue;  // see above
      SCOPED_TRACE(std::string(training ? "train" : "eval") + (format == MemoryFormat::Auto ? "" : ", channels_last"));
      const torch::Tensor y = entry_named(io, training ? "y_train" : "y");
      model->train(training);
      torch::manual_seed(8);
      const torch::Tensor out = model->forward(x);
      ASSERT_EQ(out.sizes().vec(), y.sizes().vec());
      const double diff = (out - y).abs().max().item<double>();
      report_figure(GetParam() + (training ? " train" : " eval") +
                        (format == MemoryFormat::Auto ? "" : " channels_last") + " forward, max abs diff of " +
                        number_text("%.3g", y.abs().max().item<double>()) + " from torchvision",
                    diff);
      EXPECT_LE(diff, 1e-5) << "max |y| " << y.abs().max().item<double>();
    }
  }
}

// ddptrain's fresh model, written as model.pt is, has torchvision's keys in its order, loads into torchvision with
// load_state_dict(strict=True), and each entry is distributed as torchvision's init draws it.
TEST_P(TorchvisionCnn, StateDictLoadsStrictlyIntoTorchvisionWithItsInitDistributions) {
  TempDir dir;
  torch::manual_seed(3);
  save_state_dict(dir / "ddptrain.pt", module_state(*make_model(three_channel_config(GetParam()))));
  const CommandResult r = run_command(python() + " " + reference_script() + " check --model " + GetParam() +
                                      " --seed 3 --state " + shell_quote(dir / "ddptrain.pt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Every torchvision model built here, for the checks that hold for each alike.
class TorchvisionModel : public ::testing::TestWithParam<std::string> {};

// model.reset_head on torchvision's 1000-class state dict: exactly the final Linear (head_name()) keeps the model's
// own 10-class initialisation; every other entry is the file's.
TEST_P(TorchvisionModel, ResetHeadReinitialisesExactlyTheFinalLinear) {
  TempDir dir;
  const CommandResult saved = save_torchvision_init(dir / "imagenet.pt", GetParam(), 1000, 4);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  ModelConfig cfg = three_channel_config(GetParam());
  cfg.reset_head = true;
  torch::manual_seed(0);
  const std::shared_ptr<Classifier> model = make_model(cfg);
  const std::string head = model->head_name() + ".";
  NamedTensors fresh;
  for (const auto& [name, t] : module_state(*model)) fresh.emplace_back(name, t.clone());
  EXPECT_EQ(load_init_weights(*model, cfg, dir / "imagenet.pt"),
            model->head_name() + " re-initialised (2 of the file's entries left out)");
  const NamedTensors file = load_state_dict_file(dir / "imagenet.pt");
  const NamedTensors loaded = module_state(*model);
  ASSERT_EQ(loaded.size(), file.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    const bool in_head = loaded[i].first.rfind(head, 0) == 0;
    EXPECT_TRUE(torch::equal(loaded[i].second, in_head ? fresh[i].second : file[i].second)) << loaded[i].first;
  }
}

// Two ranks x 2 images of 32x32 train 6 SGD-momentum steps from torchvision's init as Python DDP does, to the bit:
// the 5 of the first epoch (10 samples per rank) and one of the second, so the same DistributedSampler order in both
// epochs, the momentum carried across them, same batch statistics, same gradient buckets. Dropout and stochastic depth
// are off on both sides (each draws its masks from its own generator: ddptrain's per rank from job.seed + rank,
// Python's from the process's default one), and ddptrain runs every kernel tap (model.skip_padding_taps = false: the
// taps that only read padding sum in another order; tests/data/cifar10_test.cpp says why that matters).
TEST_P(TorchvisionCnn, TwoRanksTrainAsPythonDdp) {
  TempDir dir;
  write_tiny_cifar10(dir / "c", 4, 4, 3);
  const CommandResult init = save_torchvision_init(dir / "init.pt", GetParam(), 10, 5);
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const CommandResult ref = run_python_ranks(
      2, source_dir() + "/tests/python/cifar_reference.py --data " + dir / "c" + " --init " + dir / "init.pt" +
             " --out " + dir / "python.pt" + " --model " + GetParam() +
             " --dropout 0 --stochastic-depth 0 --batch 2 --steps 6 --lr 0.01 --momentum 0.9 --seed 3");
  ASSERT_TRUE(std::filesystem::exists(dir / "python.pt")) << ref.output;
  const std::string cfg = write_mnist_job(
      dir, dir / "c",
      {"data.batch_size=2", "data.workers=0", "model.name=" + GetParam(), "model.skip_padding_taps=false",
       "model.dropout=0", "model.stochastic_depth=0", "model.init_from=" + dir / "init.pt", "optimizer.lr=0.01",
       "optimizer.momentum=0.9", "job.seed=3", "job.out_dir=" + dir / "out", "training.max_steps=6",
       "training.epochs=2", "metrics.progress=off"});
  for (const auto& r : run_ranks(2, cfg + " --data.dataset=cifar10")) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_state_diff(dir / "out/model.pt", dir / "python.pt"), 0.0);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // the steps moved the weights
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionCnn, ::testing::ValuesIn(kTorchvisionCnns),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Models, TorchvisionModel,
                         ::testing::Values("mobilenet_v3_large", "efficientnet_v2_s", "regnet_y_1_6gf", "convnext_tiny",
                                           "vit_b_16"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace ddp::test
