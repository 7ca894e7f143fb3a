// ddptrain's image-folder input pipeline alone, for bench/data_bench.py: decode, RandomResizedCrop, flip, normalise
// and batch on data.workers threads, timed over a number of batches; prints one JSON line. ROOT "synthetic" times
// the synthetic dataset's pipeline instead (each image generated, then normalised and batched).
//
// usage: data_pipeline ROOT --workers N [--batch 64] [--size 224] [--batches 30] [--threads 1] [--augment standard]
//                      [--channels 3] [--normalize false]   (false: uint8 batches, as CUDA runs take them)
#include "config/config.h"
#include "data/dataset.h"
#include "data/loader.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  using namespace ddp;
  if (argc < 2) {
    std::cerr << "usage: data_pipeline ROOT|synthetic --workers N [--batch B] [--size S] [--batches K] [--threads T] "
                 "[--channels C] [--normalize false]\n";
    return 2;
  }
  const bool synthetic = std::string(argv[1]) == "synthetic";
  std::vector<std::string> overrides = {"model.name=resnet18"};
  if (synthetic) {
    overrides.insert(overrides.end(), {"data.dataset=synthetic", "model.in_channels=3", "data.image_size=224"});
  } else {
    overrides.insert(overrides.end(), {"data.dataset=image_folder", std::string("data.dir=") + argv[1]});
  }
  int64_t workers = 1, batch = 64, batches = 30, threads = 1;
  bool normalize = true;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--workers") workers = std::stoll(value);
    if (flag == "--batch") batch = std::stoll(value);
    if (flag == "--batches") batches = std::stoll(value);
    if (flag == "--threads") threads = std::stoll(value);
    if (flag == "--size") overrides.push_back("data.image_size=" + value);
    if (flag == "--augment") overrides.push_back("data.augment=" + value);
    if (flag == "--channels") overrides.push_back("model.in_channels=" + value);
    if (flag == "--normalize") normalize = value != "false";
  }
  try {
    torch::set_num_threads(static_cast<int>(threads));
    const Config cfg = parse_config("", "data_pipeline", overrides);
    const Dataset ds = synthetic ? load_dataset(cfg.data, cfg.model, cfg.job.seed, [](const std::string&) {})
                                 : load_image_folder(cfg.data);
    torch::manual_seed(0);
    const torch::Tensor order = torch::randperm(ds.train.size(), torch::kInt64);
    std::vector<int64_t> indices(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    indices.resize(static_cast<size_t>(std::min<int64_t>(ds.train.size(), (batches + 1) * batch)));
    LoaderOptions o;
    o.batch_size = batch;
    o.workers = workers;
    o.prefetch = std::max<int64_t>(2, 2 * workers);
    o.mean = cfg.data.mean;
    o.std = cfg.data.std;
    o.normalize = normalize;
    BatchLoader loader(ds.train, indices, o);
    // The first batch carries the threads' start: timing starts once it is out.
    auto first = loader.next();
    const auto start = std::chrono::steady_clock::now();
    int64_t images = 0, timed = 0;
    double checksum = 0;
    while (auto b = loader.next()) {
      images += b->size();
      checksum += b->images[0][0][0][0].item<double>();
      ++timed;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "{\"images_per_s\": %.2f, \"images\": %lld, \"batches\": %lld, \"seconds\": %.3f, \"shape\": [%lld, %lld, "
        "%lld], \"checksum\": %.4f}\n",
        static_cast<double>(images) / seconds, static_cast<long long>(images), static_cast<long long>(timed), seconds,
        static_cast<long long>(first->images.size(1)), static_cast<long long>(first->images.size(2)),
        static_cast<long long>(first->images.size(3)), checksum);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
