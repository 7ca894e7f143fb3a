// CIFAR-10's binary batches: the reader (layout, checks naming the file), the config it resolves (3x32x32, its
// per-channel mean and std), and 2-rank training against PyTorch DDP on the same files.
#include "config/config.h"
#include "data/dataset.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ddp::test {
namespace {

Config cifar_config(const std::string& dir) {
  return parse_config("[data]\ndataset = \"cifar10\"\ndir = \"" + dir + "\"\n[model]\nname = \"resnet18\"\n", "c.toml");
}

TEST(Cifar10, ReadsEveryBatchFileInOrderWithTheRecordLayout) {
  TempDir dir;
  write_tiny_cifar10(dir / "c", 6, 5, 1);
  // A record of our own in front of data_batch_1.bin: label 7, then the red, green and blue planes.
  std::vector<uint8_t> record(3073);
  record[0] = 7;
  for (int i = 0; i < 3072; ++i) record[1 + i] = static_cast<uint8_t>(i % 251);
  const std::string first = dir / "c/data_batch_1.bin";
  const std::string rest = read_file(first);
  {
    std::ofstream out(first, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(record.data()), 3073);
    out << rest;
  }
  const Config cfg = cifar_config(dir / "c");
  const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
  EXPECT_EQ(ds.name, "cifar10");
  EXPECT_EQ(ds.train.images.sizes(), (std::vector<int64_t>{31, 3, 32, 32}));
  EXPECT_EQ(ds.test.images.sizes(), (std::vector<int64_t>{5, 3, 32, 32}));
  EXPECT_EQ(ds.train.labels[0].item<int64_t>(), 7);
  EXPECT_EQ(ds.train.images[0][0][0][0].item<int>(), 0);
  EXPECT_EQ(ds.train.images[0][0][1][0].item<int>(), 32);            // row 1 of red
  EXPECT_EQ(ds.train.images[0][1][0][0].item<int>(), 1024 % 251);    // green starts at byte 1024
  EXPECT_EQ(ds.train.images[0][2][31][31].item<int>(), 3071 % 251);  // the last byte of blue
  EXPECT_EQ(ds.channels, 3);
  EXPECT_EQ(ds.image_size, 32);
}

TEST(Cifar10, ConfigTakesTheDatasetsShapeAndPerChannelStatistics) {
  const Config cfg = cifar_config("d");
  EXPECT_EQ(cfg.model.in_channels, 3);
  EXPECT_EQ(cfg.data.image_size, 32);
  EXPECT_EQ(cfg.data.mean, (PerChannel{0.4914, 0.4822, 0.4465}));
  EXPECT_EQ(cfg.data.std, (PerChannel{0.2470, 0.2435, 0.2616}));
  const std::string text = format_config(cfg);
  EXPECT_NE(text.find("mean = [0.4914, 0.4822, 0.4465]\n"), std::string::npos) << text;
  EXPECT_EQ(format_config(parse_config(text, "printed.toml")), text);
  // One value still prints as a number: configs and checkpoints of MNIST-format runs read as before.
  const std::string mnist = format_config(parse_config("[data]\nmean = 0.5\n", "m.toml"));
  EXPECT_NE(mnist.find("mean = 0.5\n"), std::string::npos) << mnist;
  EXPECT_EQ(parse_config("", "d.toml", {"data.mean=[0.5, 0.25, 0.125]", "data.dataset=cifar10", "model.name=resnet18"})
                .data.mean,
            (PerChannel{0.5, 0.25, 0.125}));
}

TEST(Cifar10, ABadBatchFileIsAnErrorNamingIt) {
  TempDir dir;
  write_tiny_cifar10(dir / "c", 2, 2, 2);
  const Config cfg = cifar_config(dir / "c");
  auto error_of = [&]() -> std::string {
    try {
      load_dataset(cfg.data, cfg.model, 0, {});
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  std::filesystem::remove(dir / "c/test_batch.bin");
  EXPECT_NE(error_of().find(dir / "c/test_batch.bin: file not found"), std::string::npos) << error_of();
  std::ofstream(dir / "c/test_batch.bin", std::ios::binary) << std::string(3000, 'x');  // not a whole record
  EXPECT_NE(error_of().find(dir / "c/test_batch.bin: 3000 bytes is not a CIFAR-10 batch"), std::string::npos)
      << error_of();
  std::ofstream(dir / "c/test_batch.bin", std::ios::binary | std::ios::trunc) << std::string(3073, '\x0c');
  EXPECT_NE(error_of().find(dir / "c/test_batch.bin: record 0 has label 12"), std::string::npos) << error_of();
}

// Two ranks of ResNet-18 (3-channel stem) on generated CIFAR-10 batches, 6 SGD-momentum steps from one init, against
// PyTorch DDP + DistributedSampler + Normalize(mean, std) on the same files: the same weights to the bit. ddptrain runs
// PyTorch's plain convolutions here (model.skip_padding_taps = false): its default leaves out taps that only read
// padding, which sums in another order, and ResNet on 32x32 images (1x1 maps in layer4, BatchNorm over 8 samples)
// amplifies any rounding difference: PyTorch itself on 2 threads instead of 1 moves conv1's weights by 3e-4 after
// two such steps. That the skipped taps give the same sums is tested in models/conv_test.cpp.
TEST(Cifar10, TwoRanksMatchPythonDdp) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torch, torchvision";
  TempDir dir;
  write_tiny_cifar10(dir / "c", 16, 8, 3);
  const CommandResult init = save_torchvision_init(dir / "init.pt", "resnet18", 10, 5);
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const CommandResult ref = run_python_ranks(2, source_dir() + "/tests/python/cifar_reference.py --data " + dir / "c" +
                                                    " --init " + dir / "init.pt" + " --out " + dir / "python.pt" +
                                                    " --batch 8 --steps 6 --lr 0.05 --momentum 0.9 --seed 3");
  ASSERT_TRUE(std::filesystem::exists(dir / "python.pt")) << ref.output;
  const std::string cfg = write_mnist_job(
      dir, dir / "c",
      {"data.batch_size=8", "data.workers=0", "model.name=resnet18", "model.skip_padding_taps=false",
       "model.init_from=" + dir / "init.pt", "optimizer.lr=0.05", "optimizer.momentum=0.9", "job.seed=3",
       "job.out_dir=" + dir / "out", "training.max_steps=6", "training.epochs=3", "metrics.progress=off"});
  for (const auto& r : run_ranks(2, cfg + " --data.dataset=cifar10")) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_state_diff(dir / "out/model.pt", dir / "python.pt"), 0.0);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // the steps moved the weights
}

}  // namespace
}  // namespace ddp::test
