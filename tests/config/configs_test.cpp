// The configs users copy (configs/*.toml): each loads, and the torchvision recipe config says what torchvision's
// reference command says, flag by flag.
#include "config/config.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

TEST(Configs, EveryShippedConfigLoads) {
  int configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/configs")) {
    if (entry.path().extension() != ".toml") continue;
    ++configs;
    const std::string path = entry.path().string();
    try {
      const Config cfg = load_config(path);
      EXPECT_EQ(format_config(parse_config(format_config(cfg), "printed.toml")), format_config(cfg)) << path;
    } catch (const std::exception& e) {
      ADD_FAILURE() << path << ": " << e.what();
    }
  }
  EXPECT_GE(configs, 6);
}

// references/classification's command for ResNet-50 IMAGENET1K_V2 (torchvision's docs, "new training recipe"):
// --batch-size 128 --lr 0.5 --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear
// --auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 --norm-weight-decay 0.0
// --label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 --train-crop-size 176 --model-ema --val-resize-size 232
// --ra-sampler --ra-reps 4, with train.py's defaults for the rest (momentum 0.9, --lr-warmup-decay 0.01,
// --model-ema-steps 32, --model-ema-decay 0.99998, --val-crop-size 224, --interpolation bilinear).
TEST(Configs, TorchvisionV2RecipeIsTheReferenceCommand) {
  const Config c = load_config(source_dir() + "/configs/imagenet_resnet50_v2.toml");
  EXPECT_EQ(c.model.name.name, "resnet50");
  EXPECT_EQ(c.data.batch_size, 128);
  EXPECT_EQ(c.optimizer.name.name, "sgd");
  EXPECT_EQ(c.optimizer.lr, 0.5);
  EXPECT_EQ(c.optimizer.hyper.number("momentum"), 0.9);
  EXPECT_EQ(c.optimizer.hyper.number("weight_decay"), 2e-5);
  EXPECT_EQ(c.optimizer.hyper.number("norm_weight_decay"), 0.0);
  EXPECT_EQ(c.optimizer.hyper.number("bias_weight_decay"), -1.0);  // unset: biases decay with the rest
  EXPECT_EQ(c.lr_scheduler.decay, LrDecay::Cosine);
  EXPECT_EQ(c.lr_scheduler.min_lr, 0.0);
  EXPECT_EQ(c.lr_scheduler.warmup_method, WarmupMethod::Linear);
  EXPECT_EQ(c.lr_scheduler.warmup_start_factor, 0.01);
  // 5 epochs of 1251 steps: RASampler's floor(1281167 / 256) * 256 / 8 ranks = 160128 images of 128 per rank.
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 5 * (1281167 / 256 * 256 / 8 / 128));
  EXPECT_EQ(c.data.auto_augment, AutoAugmentChoice::TaWide);
  EXPECT_EQ(c.training.epochs, 600);
  EXPECT_EQ(c.data.random_erase, 0.1);
  EXPECT_EQ(c.training.label_smoothing, 0.1);
  EXPECT_EQ(c.data.mixup_alpha, 0.2);
  EXPECT_EQ(c.data.cutmix_alpha, 1.0);
  EXPECT_EQ(c.data.train_crop_size, 176);
  EXPECT_EQ(c.data.val_crop_size, 224);
  EXPECT_EQ(c.data.val_resize_size, 232);
  EXPECT_EQ(c.data.interpolation, Interpolation::Bilinear);
  // presets.ClassificationPresetTrain passes the interpolation to the policy: TrivialAugmentWide(interpolation=...).
  EXPECT_EQ(c.data.auto_augment_interpolation, PolicyInterpolation::Bilinear);
  EXPECT_EQ(c.training.ema_decay, 0.99998);
  EXPECT_EQ(c.training.ema_every_steps, 32);
  EXPECT_TRUE(c.training.ema_adjust);
  EXPECT_EQ(c.data.ra_reps, 4);
}

}  // namespace
}  // namespace ddp::test
