// convnext_tiny and vit_b_16 against torchvision: state dicts load strictly both ways, eval forward, init statistics,
// 2-rank training against PyTorch DDP, FLOPs per sample, and ViT's image size rule.
#include "checkpoint/state_dict.h"
#include "config/config.h"
#include "models/classifier.h"
#include "train/init_weights.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <regex>

namespace ddp::test {
namespace {

constexpr int kSide = 32;  // ConvNeXt's smallest input; 2x2 patches for ViT

std::string reference(const std::string& command, const std::string& model, const std::string& args) {
  return python() + " " + shell_quote(source_dir() + "/tests/python/torchvision_transformers_reference.py") + " " +
         command + " --model " + model + " --side " + std::to_string(kSide) + " " + args;
}

ModelConfig config_of(const std::string& model, int64_t in_channels) {
  ModelConfig cfg;
  cfg.name = ModelChoice{model};
  cfg.in_channels = in_channels;
  cfg.num_classes = 10;
  cfg.image_size = kSide;
  return cfg;
}

class TorchvisionTransformers : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torch, torchvision";
  }
};

// torchvision's state dict loads strictly through model.init_from's path, tensor for tensor; with every weight moved
// off its init (a zero head would hide the rest), the eval forward equals torchvision's within 1e-5. The file is
// torchvision's model.state_dict() after the move: the keys, order, shapes and dtypes of the fresh model's.
// Why 1e-5: ConvNeXt runs torchvision's ops in torchvision's order (0 measured on AVX2 and the plain path). ViT's
// attention in PyTorch's eval forward is nn.MultiheadAttention (its fused inference path), ddptrain's a composition
// of the same operations, each summing the 768-term products in its own order: a few float32 units (u = 2^-24) of
// each of the 12 layers' outputs, which LayerNorm keeps from compounding; 7.2e-7 measured on AVX2 and 1.1e-6 on the
// plain path, 9x under the bound. A wrong weight, a transposed projection or a missing scale moves the logits by 1e-2
// and more.
TEST_P(TorchvisionTransformers, TorchvisionWeightsLoadStrictlyAndTheEvalForwardAgrees) {
  TempDir dir;
  const CommandResult saved = run_command(
      reference("fresh", GetParam(), "--seed 4 --perturbed " + dir / "perturbed.pt" + " --io " + dir / "io.pt"));
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const ModelConfig cfg = config_of(GetParam(), 3);
  torch::manual_seed(0);
  auto model = make_model(cfg);
  load_init_weights(*model, cfg, dir / "perturbed.pt");
  const NamedTensors file = load_state_dict_file(dir / "perturbed.pt");
  const NamedTensors ours = module_state(*model);
  ASSERT_EQ(ours.size(), file.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].first, file[i].first) << "state_dict order differs at entry " << i;
    EXPECT_TRUE(torch::equal(ours[i].second, file[i].second)) << ours[i].first;
  }
  std::map<std::string, torch::Tensor> io;
  for (const auto& [name, t] : load_state_dict_file(dir / "io.pt")) io[name] = t;
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor out = model->forward(io.at("input"));
  ASSERT_EQ(out.sizes(), io.at("output").sizes());
  const double diff = (out - io.at("output")).abs().max().item<double>();
  report_figure(GetParam() + " eval forward, max abs diff from torchvision", diff);
  EXPECT_LE(diff, 1e-5);
  EXPECT_GT(io.at("output").abs().max().item<double>(), 1e-2);  // the comparison sees more than zeros
}

// ddptrain's fresh state dict, saved as model.pt is, loads strictly into torchvision's model (3 channels, and 1 with
// ddptrain's first-convolution replacement), and each tensor looks drawn as torchvision draws it.
TEST_P(TorchvisionTransformers, OurWeightsLoadStrictlyIntoTorchvisionWithItsInitStatistics) {
  TempDir dir;
  for (int64_t channels : {3}) {  // a 1-channel first convolution: names and shapes in model_names_test's fixture
    SCOPED_TRACE("in_channels " + std::to_string(channels));
    torch::manual_seed(7);
    save_state_dict(dir / "ours.pt", module_state(*make_model(config_of(GetParam(), channels))));
    const CommandResult check = run_command(reference(
        "check", GetParam(), "--seed 8 --in-channels " + std::to_string(channels) + " --weights " + dir / "ours.pt"));
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_NE(check.output.find("loaded strictly"), std::string::npos) << check.output;
    EXPECT_NE(check.output.find("init statistics agree"), std::string::npos) << check.output;
  }
}

// Two ranks on generated CIFAR-10 batches from torchvision's init, against PyTorch DDP + DistributedSampler on the
// same files: the same weights to the bit, as the ResNet comparison (data/cifar10_test.cpp), after 6 steps: the 5 of
// the first epoch and one of the second (the sampler's set_epoch order, the momentum carried on). Stochastic depth is 0
// on both sides (ddptrain's ranks draw from their own seeded generators, the Python ranks from theirs), dropout is
// ViT's default 0; ddptrain runs PyTorch's plain convolutions (model.skip_padding_taps = false), as the ResNet
// comparison does.
TEST_P(TorchvisionTransformers, TwoRanksTrainAsPythonDdp) {
  const std::string model = GetParam();
  const int steps = 6, batch = 2;
  TempDir dir;
  write_tiny_cifar10(dir / "c", 4, 4, 3);  // 10 samples per rank: 5 full batches per epoch
  const CommandResult init = run_command(reference("fresh", model, "--seed 5 --out " + dir / "init.pt"));
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const std::string common =
      " --batch " + std::to_string(batch) + " --steps " + std::to_string(steps) + " --lr 0.01 --momentum 0.9 --seed 3";
  const CommandResult ref = run_python_ranks(2, source_dir() + "/tests/python/cifar_reference.py --model " + model +
                                                    " --data " + dir / "c" + " --init " + dir / "init.pt" + " --out " +
                                                    dir / "python.pt" + " --dropout 0 --stochastic-depth 0" + common);
  ASSERT_TRUE(std::filesystem::exists(dir / "python.pt")) << ref.output;
  const std::string cfg =
      write_mnist_job(dir, dir / "c",
                      {"data.batch_size=" + std::to_string(batch), "data.workers=0", "model.name=" + model,
                       "model.skip_padding_taps=false", "model.init_from=" + dir / "init.pt", "optimizer.lr=0.01",
                       "optimizer.momentum=0.9", "job.seed=3", "job.out_dir=" + dir / "out",
                       "training.max_steps=" + std::to_string(steps), "metrics.progress=off"});
  const std::string depth = model == "convnext_tiny" ? " --model.stochastic_depth=0" : "";
  for (const auto& r : run_ranks(2, cfg + " --data.dataset=cifar10" + depth)) ASSERT_EQ(r.exit_code, 0) << r.output;
  const double diff = max_state_diff(dir / "out/model.pt", dir / "python.pt");
  report_figure(model + " 2 ranks x " + std::to_string(steps) + " steps, max abs diff from Python DDP", diff);
  EXPECT_EQ(diff, 0.0);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // the steps moved the weights
}

// ddptrain's FLOPs per training sample (said after its first micro-batch) equal FlopCounterMode's count of
// torchvision's model, every kernel tap computed (model.skip_padding_taps = false). A count does not depend on the
// summation order: one intra-op thread, as the oracle's flops command runs. The 1e-5 is the printed figure's
// precision: GFLOP with 6 significant digits (%.6g) is at most 5e-6 off the count.
TEST_P(TorchvisionTransformers, FlopsPerSampleEqualFlopCounterModes) {
  TempDir dir;
  write_tiny_cifar10(dir / "c", 2, 2, 1);
  const std::string cfg = write_mnist_job(
      dir, dir / "c",
      {"job.out_dir=" + dir / "out", "model.name=" + GetParam(), "model.skip_padding_taps=false", "data.batch_size=2",
       "data.workers=0", "training.max_steps=1", "metrics.log_every_steps=1", "job.threads=1"});
  const CommandResult ours = run_command(ddptrain_path() + " " + cfg + " --data.dataset=cifar10");
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  std::smatch said;
  ASSERT_TRUE(std::regex_search(ours.output, said, std::regex("FLOPs: ([0-9.e+]+) GFLOP per training sample")))
      << ours.output;
  const CommandResult theirs = run_command(reference("flops", GetParam(), "--batch 2"));
  ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
  const double ratio = std::stod(said[1]) * 1e9 / std::stod(theirs.output);
  report_figure(GetParam() + " FLOPs per sample, ddptrain / FlopCounterMode", ratio);
  EXPECT_NEAR(ratio, 1.0, 1e-5) << ours.output << theirs.output;
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionTransformers, ::testing::Values("convnext_tiny", "vit_b_16"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ViT splits images into 16x16 patches and has one position embedding length: an image size that is not a multiple of
// 16 is a config error (exit 2) naming the key, as is an evaluation crop of another size.
TEST(VitConfig, ImageSizeMustBeAMultipleOf16) {
  const std::vector<std::string> vit = {"model.name=vit_b_16", "data.dataset=synthetic"};
  auto error = [&](std::vector<std::string> more) {
    more.insert(more.begin(), vit.begin(), vit.end());
    try {
      parse_config("", "v.toml", more);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({"data.image_size=48"}), "");
  EXPECT_NE(error({"data.image_size=40"}).find("data.image_size = 40 is not a multiple of 16"), std::string::npos)
      << error({"data.image_size=40"});
  const std::string folder = error({"data.dataset=image_folder", "data.image_size=32", "data.val_crop_size=48"});
  EXPECT_NE(folder.find("data.val_crop_size = 48 differs from data.image_size = 32"), std::string::npos) << folder;
  EXPECT_EQ(error({"model.name=convnext_tiny", "data.image_size=40"}), "");  // ConvNeXt takes any size from 32
  // An image size the model never sees (both crops set) is no side of ConvNeXt's.
  EXPECT_EQ(error({"model.name=convnext_tiny", "data.dataset=image_folder", "data.image_size=24",
                   "data.train_crop_size=64", "data.val_crop_size=64", "data.val_resize_size=64"}),
            "");
  TempDir dir;
  const std::string cfg = write_mnist_job(dir, dir / "data", {"model.name=vit_b_16", "job.out_dir=" + dir / "out"});
  const CommandResult run = run_command(ddptrain_path() + " " + cfg + " --data.dataset=synthetic --data.image_size=40");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("data.image_size"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace ddp::test
