// Image folders against torchvision: ImageFolder's listing (classes, class_to_idx, sample order), the v2 transforms
// (Resize + CenterCrop, RandomResizedCrop + flip from one seed) to the byte, the per-sample seeds (the same batches
// for any worker count), the folder errors, and 2-rank training against Python DDP on ImageFolder.
#include "config/config.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"
#include "data/loader.h"
#include "data/sample_transforms.h"
#include "tests/report/metrics_fields.h"
#include "tests/report/tensorboard/tensorboard_scalars.h"
#include "tests/support/test_support.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

std::string image_folder_script() { return source_dir() + "/tests/python/image_folder_reference.py"; }

// Runs the reference script with `args`; fails the test on a non-zero exit.
void image_folder_python(const std::string& args) {
  const CommandResult r = run_command(python() + " " + image_folder_script() + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

torch::Tensor image_folder_raw(const std::string& path, std::vector<int64_t> shape) {
  const std::string bytes = read_file(path);
  torch::Tensor t = torch::empty(shape, torch::kUInt8);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), t.numel()) << path;
  std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), std::min<size_t>(bytes.size(), static_cast<size_t>(t.numel())));
  return t;
}

// ROOT/{train,val}/{a,b}/x.jpg, each the uint8 array `img` that `image_lines` (Python, numpy as np) define, saved by
// PIL at JPEG `quality`.
void write_pil_jpeg_folder(const std::string& root, const std::string& image_lines, int quality) {
  const CommandResult made =
      run_command(python() + " -c \"import os, sys, numpy as np; from PIL import Image\n" + image_lines +
                  "for split in ('train', 'val'):\n"
                  "    for k in ('a', 'b'):\n"
                  "        os.makedirs(os.path.join(sys.argv[1], split, k), exist_ok=True)\n"
                  "        Image.fromarray(img).save(os.path.join(sys.argv[1], split, k, 'x.jpg'), "
                  "quality=" +
                  std::to_string(quality) + ")\n\" " + root);
  ASSERT_EQ(made.exit_code, 0) << made.output;
}

Config image_folder_config(const std::string& dir, const std::vector<std::string>& keys = {}) {
  std::vector<std::string> all = {"data.dataset=image_folder", "data.dir=" + dir, "model.name=resnet18"};
  all.insert(all.end(), keys.begin(), keys.end());
  return parse_config("", "f.toml", all);
}

TEST(ImageFolder, ListingMatchesTorchvision) {
  if (!python_has_modules("torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  TempDir dir;
  const std::string root = dir / "root";
  // Class names whose byte order differs from a case-folded or numeric one; images at any depth, extensions in any
  // case, files torchvision passes over, a folder reached through a link, a plain file beside the classes.
  for (const char* f : {"b/x.JPG", "b/y.jpeg", "b/notes.txt", "b/Z.PnG", "b/sub/deep/q.webp", "b/sub2/r.bmp", "A/1.png",
                        "A/10.png", "A/9.png", "A/.png", "10/a.tiff", "10/b.TIF", "9/c.pgm", "9/d.ppm", "a_dir/e.jpg",
                        "a_dir/e.jpg.bak", "outside/linked.png"})
    write_file(root + "/" + f, "not decoded by the listing");
  fs::rename(root + "/outside", dir / "outside");
  fs::create_directory_symlink(dir / "outside", root + "/a_dir/link");
  write_file(root + "/README.png", "a file, not a class");
  image_folder_python("list " + root + " " + dir / "py.json");
  const nlohmann::json py = nlohmann::json::parse(read_file(dir / "py.json"));

  const ImageFolderListing listing = list_image_folder(root);
  EXPECT_EQ(listing.classes, py["classes"].get<std::vector<std::string>>());
  ASSERT_EQ(listing.paths.size(), py["samples"].size());
  for (size_t i = 0; i < listing.paths.size(); ++i) {
    EXPECT_EQ(listing.paths[i], py["samples"][i][0].get<std::string>()) << i;
    EXPECT_EQ(listing.targets[i], py["samples"][i][1].get<int64_t>()) << i;
  }
  EXPECT_EQ(listing.paths.size(), 15u);  // the .txt and .bak files are passed over
}

TEST(ImageFolder, FolderErrorsNameTheFolder) {
  TempDir dir;
  fs::create_directories(dir / "empty");
  EXPECT_NE(error_of([&] { list_image_folder(dir / "empty"); }).find(dir / "empty: no class folder found"),
            std::string::npos);
  EXPECT_NE(error_of([&] { list_image_folder(dir / "missing"); }).find(dir / "missing: no class folder found"),
            std::string::npos);
  write_file(dir / "r/cat/1.png", "x");
  write_file(dir / "r/dog/notes.txt", "x");
  fs::create_directories(dir / "r/emu");
  const std::string e = error_of([&] { list_image_folder(dir / "r"); });
  EXPECT_NE(e.find("no image in class folders " + dir / "r/dog, " + dir / "r/emu"), std::string::npos) << e;
  EXPECT_NE(e.find(".jpg, .jpeg, .png"), std::string::npos) << e;
  // Through the dataset: train/ and val/ must hold the same classes.
  write_file(dir / "d/train/cat/1.png", "x");
  write_file(dir / "d/train/dog/1.png", "x");
  write_file(dir / "d/val/cat/1.png", "x");
  const Config cfg = image_folder_config(dir / "d");
  const std::string v = error_of([&] { load_dataset(cfg.data, cfg.model, 0, {}); });
  EXPECT_NE(v.find(dir / "d/val: its class folders differ from the training split's"), std::string::npos) << v;
}

TEST(ImageFolder, ConfigResolvesClassesShapeAndImageNetStatistics) {
  TempDir dir;
  for (const char* c : {"a", "b", "c", "d"}) write_file(dir / ("f/train/" + std::string(c) + "/1.png"), "x");
  const Config cfg = image_folder_config(dir / "f");
  EXPECT_EQ(cfg.model.num_classes, 4);
  EXPECT_EQ(cfg.model.in_channels, 3);
  EXPECT_EQ(cfg.data.image_size, 224);
  EXPECT_EQ(cfg.data.resize_size, 256);
  EXPECT_EQ(cfg.data.mean, (PerChannel{0.485, 0.456, 0.406}));
  EXPECT_EQ(cfg.data.std, (PerChannel{0.229, 0.224, 0.225}));
  const Config small = image_folder_config(dir / "f", {"data.image_size=112", "model.num_classes=7"});
  EXPECT_EQ(small.data.resize_size, 128);
  EXPECT_EQ(small.model.num_classes, 7);  // set: kept
  // Fewer outputs than class folders: a config error naming the key, before any image is read.
  const std::string fewer = error_of([&] { image_folder_config(dir / "f", {"model.num_classes=3"}); });
  EXPECT_NE(fewer.find("--model.num_classes=3: data.dataset = \"image_folder\" has 4 classes (the class folders of " +
                       dir / "f/train), but model.num_classes = 3"),
            std::string::npos)
      << fewer;
  const std::string e = error_of([&] { image_folder_config(dir / "f", {"data.resize_size=100"}); });
  EXPECT_NE(e.find("data.resize_size = 100 is smaller than data.image_size = 224"), std::string::npos) << e;
}

TEST(ImageTransforms, MatchTorchvisionV2ToTheByte) {
  if (!python_has_modules("torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  TempDir dir;
  image_folder_python("transforms " + dir.path());
  const nlohmann::json cases = nlohmann::json::parse(read_file(dir / "cases.json"));
  ASSERT_GT(cases.size(), 30u);
  int bicubic_cases = 0;
  for (const auto& c : cases) {
    const int64_t h = c["h"], w = c["w"], size = c["size"];
    const torch::Tensor hwc =
        image_folder_raw(dir / ("src_" + std::to_string(c["src"].get<int>()) + ".rgb"), {h, w, 3});
    const torch::Tensor image = hwc.permute({2, 0, 1});
    const Interpolation mode =
        c.value("interp", "bilinear") == "bicubic" ? Interpolation::Bicubic : Interpolation::Bilinear;
    torch::Tensor out;
    if (c["kind"] == "eval") {
      out = center_crop(resize_shorter_side(image, c["resize"].get<int64_t>(), mode), size);
    } else {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(c["seed"].get<uint64_t>());
      const CropBox box = random_resized_crop_box(h, w, CropRanges{}, gen);
      out = resize_to(image.slice(1, box.top, box.top + box.height).slice(2, box.left, box.left + box.width), size,
                      size, mode);
      if (random_flip(gen)) out = out.flip(-1);
    }
    const torch::Tensor expected = image_folder_raw(dir / c["out"].get<std::string>(), {3, size, size});
    EXPECT_TRUE(torch::equal(out.contiguous(), expected)) << c.dump();
    bicubic_cases += mode == Interpolation::Bicubic;
  }
  EXPECT_EQ(bicubic_cases, 10);
}

// The FixRes keys: training's crop, evaluation's resize and crop, each defaulting to image_size and resize_size; they
// belong to image folders only.
TEST(ImageFolder, FixResCropSizesResolveAndApply) {
  if (!python_has_modules("PIL, numpy")) GTEST_SKIP() << python() << " does not have PIL, numpy";
  TempDir dir;
  image_folder_python("make " + dir / "f" + " --classes 2 --train 2 --val 2 --seed 3 --min-side 40 --max-side 70");
  const Config plain = image_folder_config(dir / "f", {"data.image_size=48"});
  EXPECT_EQ(plain.data.train_crop_size, 48);
  EXPECT_EQ(plain.data.val_crop_size, 48);
  EXPECT_EQ(plain.data.resize_size, 54);  // 48 * 256 / 224
  EXPECT_EQ(plain.data.val_resize_size, 54);
  const Config fixres = image_folder_config(dir / "f", {"data.train_crop_size=24", "data.val_crop_size=40",
                                                        "data.val_resize_size=44", "data.interpolation=bicubic"});
  EXPECT_EQ(fixres.data.image_size, 224);
  const Dataset ds = load_dataset(fixres.data, fixres.model, 0, {});
  EXPECT_EQ(ds.image_size, 24);
  EXPECT_EQ(ds.train.source->read(0, 5).image.sizes(), (c10::IntArrayRef{3, 24, 24}));
  // Evaluation: Resize(44, bicubic) + CenterCrop(40) of the decoded file.
  const torch::Tensor val = ds.test.source->read(1, 0).image;
  DecodeOptions whole;
  const DecodedImage decoded = read_image(dir / "f/val/class_00/img_0001.png", whole);
  const torch::Tensor pixels =
      torch::from_blob(const_cast<uint8_t*>(decoded.rgb.data()), {decoded.height, decoded.width, 3}, torch::kUInt8)
          .permute({2, 0, 1});
  EXPECT_TRUE(torch::equal(val, center_crop(resize_shorter_side(pixels, 44, Interpolation::Bicubic), 40)));
  EXPECT_FALSE(torch::equal(val, center_crop(resize_shorter_side(pixels, 44, Interpolation::Bilinear), 40)));
  const std::string small = error_of([&] {
    image_folder_config(dir / "f", {"data.val_crop_size=64", "data.val_resize_size=60"});
  });
  EXPECT_NE(small.find("data.val_resize_size = 60 is smaller than data.val_crop_size = 64"), std::string::npos)
      << small;
  const std::string elsewhere = error_of([&] {
    parse_config("", "f.toml", {"data.dataset=synthetic", "data.train_crop_size=24"});
  });
  EXPECT_NE(elsewhere.find("data.train_crop_size applies to data.dataset = \"image_folder\" or \"webdataset\" only"),
            std::string::npos)
      << elsewhere;
}

TEST(ImageTransforms, SampleSeedsDifferBySeedEpochAndIndex) {
  EXPECT_EQ(sample_seed(1, 2, 3), sample_seed(1, 2, 3));
  EXPECT_NE(sample_seed(1, 2, 3), sample_seed(2, 2, 3));
  EXPECT_NE(sample_seed(1, 2, 3), sample_seed(1, 3, 3));
  EXPECT_NE(sample_seed(1, 2, 3), sample_seed(1, 2, 4));
  EXPECT_NE(sample_seed(0, 0, 1), sample_seed(0, 1, 0));
}

// The augmented training batches of an epoch are the same whichever thread assembles them, and differ by epoch.
TEST(ImageFolder, AugmentedBatchesDoNotDependOnWorkers) {
  if (!python_has_modules("PIL, numpy")) GTEST_SKIP() << python() << " does not have PIL, numpy";
  TempDir dir;
  image_folder_python("make " + dir / "f" + " --classes 2 --train 5 --val 1 --seed 4 --min-side 20 --max-side 60");
  const Config cfg = image_folder_config(dir / "f", {"data.image_size=16"});
  const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
  ASSERT_EQ(ds.train.size(), 10);
  EXPECT_EQ(ds.classes, (std::vector<std::string>{"class_00", "class_01"}));
  auto epoch_images = [&](int64_t workers, int64_t epoch) {
    LoaderOptions o;
    o.batch_size = 3;
    o.workers = workers;
    o.seed = 7;
    o.epoch = epoch;
    BatchLoader loader(ds.train, {9, 0, 4, 4, 1, 8, 2, 3}, o);
    std::vector<torch::Tensor> out;
    while (auto b = loader.next()) out.push_back(b->images);
    return torch::cat(out);
  };
  const torch::Tensor one = epoch_images(0, 0);
  EXPECT_EQ(one.sizes(), (std::vector<int64_t>{8, 3, 16, 16}));
  EXPECT_TRUE(torch::equal(one, epoch_images(3, 0)));
  EXPECT_TRUE(torch::equal(one[2], one[3]));  // one sample, one epoch: one crop
  EXPECT_FALSE(torch::equal(one, epoch_images(1, 1)));
}

TEST(ImageTransforms, TrainingCropScaleKeepsTheScaledCropAtLeastTheOutputSize) {
  EXPECT_EQ(training_crop_scale({0, 0, 100, 100}, 64), 1u);
  EXPECT_EQ(training_crop_scale({0, 0, 128, 300}, 64), 2u);
  EXPECT_EQ(training_crop_scale({0, 0, 300, 255}, 64), 2u);  // 255 / 4 < 64
  EXPECT_EQ(training_crop_scale({0, 0, 256, 256}, 64), 4u);
  EXPECT_EQ(training_crop_scale({5, 7, 4000, 3000}, 224), 8u);
  // Edges divided by the scale and rounded outwards, inside the decoded image.
  EXPECT_EQ(scaled_box({3, 5, 10, 11}, 2, 100, 100), (CropBox{1, 2, 6, 6}));
  EXPECT_EQ(scaled_box({0, 0, 375, 500}, 8, 47, 63), (CropBox{0, 0, 47, 63}));
  EXPECT_EQ(scaled_box({9, 9, 4, 4}, 1, 20, 20), (CropBox{9, 9, 4, 4}));
}

// A training crop of a large JPEG is decoded at a DCT scale (1/2 .. 1/8) and stays close to torchvision's crop of the
// full-size image: the same box from the same draws, the same flip, pixels within a small mean difference.
TEST(ImageFolder, LargeTrainingCropsAreDecodedScaledAndStayCloseToTheFullSizeCrop) {
  if (!python_has_modules("PIL, numpy")) GTEST_SKIP() << python() << " does not have PIL, numpy";
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(
      write_pil_jpeg_folder(dir / "f",
                            "y, x = np.mgrid[0:480, 0:640] / 40.0\n"
                            "img = np.stack([128 + 100 * np.sin(x + y / 3), 128 + 90 * np.cos(y - x / 2), "
                            "128 + 80 * np.sin(x * y / 30)], -1).astype(np.uint8)\n",
                            90));
  const Config cfg = image_folder_config(dir / "f", {"data.image_size=64"});
  const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
  const DecodedImage full = read_image(dir / "f/train/a/x.jpg", {});
  ASSERT_EQ(full.height, 480);
  int scaled = 0;
  double worst = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const CropBox box = random_resized_crop_box(480, 640, CropRanges{}, gen);
    const torch::Tensor image =
        torch::from_blob(const_cast<uint8_t*>(full.rgb.data()), {480, 640, 3}, torch::kUInt8).permute({2, 0, 1});
    torch::Tensor expected =
        resize_to(image.slice(1, box.top, box.top + box.height).slice(2, box.left, box.left + box.width), 64, 64);
    if (random_flip(gen)) expected = expected.flip(-1);
    const torch::Tensor got = ds.train.source->read(0, seed).image;
    scaled += training_crop_scale(box, 64) > 1;
    const double diff = (got.to(torch::kFloat) - expected.to(torch::kFloat)).abs().mean().item<double>();
    worst = std::max(worst, diff);
  }
  EXPECT_GE(scaled, 12);  // most crops of 640x480 are at least twice 64 on both sides
  EXPECT_LT(worst, 3.0) << "mean |difference| of a crop decoded scaled, out of 255";
  EXPECT_GT(worst, 0.0);  // decoded at full size the crops would be equal to the byte
  std::cout << "[ figures ] " << scaled << " of 24 crops decoded scaled; mean |difference| at most " << worst << "\n";
}

// Evaluation decodes a JPEG at a DCT scale where its shorter side stays at least twice the resize, and resizes it to
// the size torchvision's Resize gives the full image: 131x262 at resize 32 is 32x64 (int(32 * 262 / 131)), where the
// 66x131 of its 1/2 decode alone would give 32x63 and stretch the crop by 1.6%. A horizontal sine of period 40 pixels
// shows a stretch: 1 to 3 pixels of phase across the crop, about 13 levels of mean difference in red.
TEST(ImageFolder, AScaledEvaluationDecodeIsResizedAsTheFullImage) {
  if (!python_has_modules("PIL, numpy")) GTEST_SKIP() << python() << " does not have PIL, numpy";
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_pil_jpeg_folder(
      dir / "f",
      "y, x = np.mgrid[0:131, 0:262]\n"
      "img = np.stack([128 + 100 * np.sin(2 * np.pi * x / 40), 128 + 90 * np.cos(2 * np.pi * y / 50), "
      "0 * x + 128], -1).astype(np.uint8)\n",
      95));
  const Config cfg = image_folder_config(dir / "f", {"data.image_size=32", "data.resize_size=32"});
  const std::string path = dir / "f/val/a/x.jpg";
  const SampleTransforms eval(cfg.data, /*train=*/false);
  const DecodedImage scaled = read_image(path, eval.decode_options());
  ASSERT_EQ(scaled.scale, 2u);  // 66x131: its shorter side is at least 2 x 32
  const DecodedImage full = read_image(path, {});
  const torch::Tensor image =
      torch::from_blob(const_cast<uint8_t*>(full.rgb.data()), {full.height, full.width, 3}, torch::kUInt8)
          .permute({2, 0, 1});
  const torch::Tensor expected = center_crop(resize_to(image, 32, 64), 32);
  const torch::Tensor got = eval(path, read_file_bytes(path), 0).image;
  ASSERT_EQ(got.sizes(), expected.sizes());
  const double red = (got[0].to(torch::kFloat) - expected[0].to(torch::kFloat)).abs().mean().item<double>();
  std::cout << "[ figures ] mean |difference| in red of the 1/2-scale decode's evaluation crop: " << red << "\n";
  EXPECT_LT(red, 2.0) << "out of 255";
}

// A file that cannot be decoded: by default the run stops, the rank that read it naming the file, and no rank is
// left waiting; with data.on_bad_sample = "skip" the next readable sample takes its place and the replacements are
// counted over all ranks (metrics.jsonl, TensorBoard, summary).
TEST(ImageFolder, BadSamplesStopTheRunOrAreReplacedAndCounted) {
  if (!python_has_modules("PIL, numpy")) GTEST_SKIP() << python() << " does not have PIL, numpy";
  TempDir dir;
  image_folder_python("make " + dir / "f" + " --classes 2 --train 4 --val 1 --seed 2 --min-side 20 --max-side 30");
  const std::string bad = dir / "f/train/class_01/img_0002.png";
  const std::string whole = read_file(bad);
  write_file(bad, whole.substr(0, whole.size() / 2));     // truncated
  write_file(dir / "f/train/class_00/img_0001.png", "");  // zero bytes
  const std::vector<std::string> keys = {
      "model.name=resnet18",    "data.image_size=16",        "data.batch_size=2", "job.out_dir=" + dir / "out",
      "metrics.progress=plain", "metrics.log_every_steps=1", "training.epochs=1"};
  const std::string cfg = write_mnist_job(dir, dir / "f", keys) + " --data.dataset=image_folder";
  bool named = false;
  for (const auto& r : run_ranks(2, cfg)) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    named = named || r.output.find("] error: " + dir / "f/train/class_0") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no rank named the file it could not read";

  const auto skipped = run_ranks(2, cfg + " --data.on_bad_sample=skip --metrics.tensorboard=true");
  for (const auto& r : skipped) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(skipped[0].output.find("bad samples replaced   2"), std::string::npos) << skipped[0].output;
  const std::vector<std::string> lines = read_lines(dir / "out/metrics.jsonl");
  int64_t last = -1;
  std::map<int64_t, double> by_step;
  for (const std::string& line : lines) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["kind"] == "train") by_step[record["step"].get<int64_t>()] = last = record["bad_samples"].get<int64_t>();
  }
  EXPECT_EQ(last, 2);  // 8 samples over 2 ranks, no padding: each bad file read once in the epoch
  if (python_has_modules("tensorboard")) {
    std::map<int64_t, double> scalars;
    for (const auto& s : read_tensorboard_scalars(dir / "out/tensorboard"))
      if (s.tag == "data/bad_samples") scalars[s.step] = s.value;
    EXPECT_EQ(scalars, by_step);
  }
  RunConditions run;
  run.multi_rank = run.image_folder = true;  // 2 classes: no top-5
  EXPECT_GT(expect_records_as_the_table_says(dir / "out/metrics.jsonl", run).first, 0);
}

// A folder whose classes differ in colour and in the direction of a bar, trained from scratch with the standard
// augmentation (RandomResizedCrop + flip) on two ranks: the model learns it.
TEST(ImageFolder, LearnableFolderReaches95PercentValidationAccuracy) {
  if (!python_has_modules("PIL, numpy")) GTEST_SKIP() << python() << " does not have PIL, numpy";
  TempDir dir;
  image_folder_python("make " + dir / "f" +
                      " --learnable --classes 4 --train 32 --val 16 --seed 6 --min-side 28 --max-side 44");
  const std::string cfg =
      write_mnist_job(dir, dir / "f",
                      {"model.name=resnet18", "data.image_size=32", "data.batch_size=8", "data.workers=2",
                       "optimizer.lr=0.05", "optimizer.momentum=0.9", "training.epochs=16", "lr_scheduler.decay=cosine",
                       "training.eval_every_epochs=0", "job.out_dir=" + dir / "out", "metrics.progress=off"});
  const auto ranks = run_ranks(2, cfg + " --data.dataset=image_folder");
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  // A property, not a trajectory: each class has its own colour, far from the others' in hue and brightness, and a
  // white bar across or down, which crops, rescaling and horizontal flips keep; 16 epochs of a cosine schedule solve
  // it on any machine's kernels. 0.95 of 16 validation images asks for all 16; chance is 0.25.
  const double accuracy = last_eval_value(dir / "out/metrics.jsonl", "accuracy");
  EXPECT_GE(accuracy, 0.95) << ranks[0].output;
  std::cout << "[ measured ] validation accuracy " << accuracy << "\n";
}

// Two ranks of ResNet-18 on a generated folder of PNGs (decoded exactly as PIL does) with data.augment = "none",
// against Python DDP on torchvision's ImageFolder with the same v2 transforms, DistributedSampler and init: the same
// weights to the bit (convolutions as PyTorch sums them: model.skip_padding_taps = false, see cifar10_test.cpp).
TEST(ImageFolder, TwoRanksMatchPythonDdp) {
  if (!python_has_modules("torch, torchvision, PIL")) GTEST_SKIP() << python() << " does not have torchvision, PIL";
  TempDir dir;
  image_folder_python("make " + dir / "f" + " --classes 3 --train 8 --val 2 --seed 1 --min-side 30 --max-side 50");
  const CommandResult init = save_torchvision_init(dir / "init.pt", "resnet18", 3, 5);
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const CommandResult ref = run_python_ranks(
      2, image_folder_script() + " train --data " + dir / "f" + " --init " + dir / "init.pt" + " --out " +
             dir / "python.pt" + " --batch 4 --steps 5 --lr 0.05 --momentum 0.9 --seed 3 --size 32 --resize 36");
  ASSERT_TRUE(fs::exists(dir / "python.pt")) << ref.output;
  const std::string cfg = write_mnist_job(
      dir, dir / "f",
      {"data.batch_size=4", "data.workers=2", "model.name=resnet18", "model.skip_padding_taps=false",
       "data.augment=none", "data.image_size=32", "data.resize_size=36", "model.init_from=" + dir / "init.pt",
       "optimizer.lr=0.05", "optimizer.momentum=0.9", "job.seed=3", "job.out_dir=" + dir / "out",
       "training.max_steps=5", "training.epochs=3", "metrics.progress=off"});
  for (const auto& r : run_ranks(2, cfg + " --data.dataset=image_folder")) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_state_diff(dir / "out/model.pt", dir / "python.pt"), 0.0);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // the steps moved the weights
  const nlohmann::json classes = nlohmann::json::parse(read_file(dir / "out/classes.json"));
  EXPECT_EQ(classes["classes"], nlohmann::json({"class_00", "class_01", "class_02"}));
  EXPECT_EQ(classes["class_to_idx"]["class_02"], 2);
}

}  // namespace
}  // namespace ddp::test
