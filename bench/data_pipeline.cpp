// ddptrain's image-folder input pipeline alone, for bench/data_bench.py: the training loader a CPU rank configures
// from its [data] section (decode, RandomResizedCrop, flip, normalise, batch on data.workers threads, data.prefetch
// batches ahead), timed over a number of batches; prints one JSON line with images/s and CPU-seconds per image.
// ROOT "synthetic" times the synthetic dataset's pipeline instead (each image generated, then normalised and batched);
// ROOT "shards:PATTERN" tar shards (data.dataset = "webdataset", data.train_shards = PATTERN) in the order a rank of
// one reads them (ShardSampler with data.shuffle_buffer and data.shards_in_flight, --shuffle-buffer, --in-flight).
//
// --plan-only true: no batch; prints the seconds from the start to the epoch's order planned (the dataset loaded: an
// image folder walked, the shards' indexes read) with the sample and shard counts.
//
// usage: data_pipeline ROOT|synthetic --workers N|auto [--prefetch P] [--batch 64] [--size 224] [--batches 30]
//        [--skip 1] [--threads 1] [--augment standard] [--auto-augment none] [--random-erase 0] [--channels 3]
//        [--normalize false] [--memory-format channels_last] [--shuffle-buffer 1000] [--in-flight 4] [--plan-only true]
//
// --auto-augment POLICY, --random-erase P: data.auto_augment and data.random_erase on top of the standard augmentation.
//
// --normalize false: uint8 batches, as CUDA runs take them (normalised on the device); with --memory-format
// channels_last in NHWC strides, as a CUDA run's model.memory_format = "auto" has them written.
//
// --skip S batches are read before the --batches timed ones (the threads starting, the batches assembled ahead while
// the first was awaited), and S more follow them in the sample order, so that the loader is as full at the end of the
// timed batches as at their start.
#include "base/cpus.h"
#include "config/config.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/loader_options.h"
#include "data/shard_sampler.h"
#include "train/linked_kinds.h"

#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

namespace {

// CPU time of the whole process so far (every thread), user and system.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ddp;
  if (argc < 2) {
    std::cerr << "usage: data_pipeline ROOT|synthetic --workers N|auto [--prefetch P] [--batch B] [--size S] "
                 "[--batches K] [--skip S] [--threads T] [--augment standard|none] [--auto-augment POLICY] "
                 "[--random-erase P] [--channels C] [--normalize false] [--memory-format channels_last] "
                 "[--shuffle-buffer N] [--in-flight N] [--plan-only true]\n";
    return 2;
  }
  const auto start_time = std::chrono::steady_clock::now();
  const std::string root = argv[1];
  const bool synthetic = root == "synthetic", shards = root.rfind("shards:", 0) == 0;
  std::vector<std::string> overrides = {"model.name=resnet18"};
  if (synthetic) {
    overrides.insert(overrides.end(), {"data.dataset=synthetic", "model.in_channels=3", "data.image_size=224"});
  } else if (shards) {
    overrides.insert(overrides.end(), {"data.dataset=webdataset", "model.num_classes=1000",
                                       "data.train_shards=" + root.substr(7), "data.val_shards=" + root.substr(7)});
  } else {
    overrides.insert(overrides.end(), {"data.dataset=image_folder", std::string("data.dir=") + argv[1]});
  }
  int64_t batches = 30, skip = 1, threads = 1;
  bool normalize = true, plan_only = false, channels_last = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--workers") overrides.push_back("data.workers=" + value);
    if (flag == "--prefetch") overrides.push_back("data.prefetch=" + value);
    if (flag == "--batch") overrides.push_back("data.batch_size=" + value);
    if (flag == "--batches") batches = std::stoll(value);
    if (flag == "--skip") skip = std::stoll(value);
    if (flag == "--threads") threads = std::stoll(value);
    if (flag == "--size") overrides.push_back("data.image_size=" + value);
    if (flag == "--augment") overrides.push_back("data.augment=" + value);
    if (flag == "--auto-augment") overrides.push_back("data.auto_augment=" + value);
    if (flag == "--random-erase") overrides.push_back("data.random_erase=" + value);
    if (flag == "--channels") overrides.push_back("model.in_channels=" + value);
    if (flag == "--normalize") normalize = value != "false";
    if (flag == "--memory-format") channels_last = value == "channels_last";
    if (flag == "--shuffle-buffer") overrides.push_back("data.shuffle_buffer=" + value);
    if (flag == "--in-flight") overrides.push_back("data.shards_in_flight=" + value);
    if (flag == "--plan-only") plan_only = value == "true";
  }
  try {
    torch::set_num_threads(static_cast<int>(threads));
    hand_down_linked_kinds();
    const Config cfg = parse_config("", "data_pipeline", overrides);
    const Dataset ds = synthetic || shards ? load_dataset(cfg.data, cfg.model, cfg.job.seed, [](const std::string&) {})
                                           : load_image_folder(cfg.data);
    torch::manual_seed(0);
    const int64_t batch = cfg.data.batch_size;
    std::vector<int64_t> indices;
    if (shards) {  // as Trainer::train_sampler orders an epoch for a rank of one
      ShardSampler sampler(ds.train.shard_sizes, 1, 1, 0, shard_order(cfg.data, cfg.job.seed));
      sampler.set_epoch(0);
      indices = sampler.samples_from(0).indices;
    } else {
      const torch::Tensor order = torch::randperm(ds.train.size(), torch::kInt64);
      indices.assign(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    }
    if (plan_only) {
      std::printf("{\"start_s\": %.3f, \"samples\": %lld, \"shards\": %lld}\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count(),
                  static_cast<long long>(ds.train.size()), static_cast<long long>(ds.train.shard_sizes.size()));
      return 0;
    }
    indices.resize(static_cast<size_t>(std::min<int64_t>(ds.train.size(), (batches + 2 * skip) * batch)));
    // As Trainer::loader_options makes it for a rank of one on the CPU whose step runs on `threads` threads.
    const int64_t workers = resolve_workers(cfg.data.workers, available_cpus(), 1, threads);
    LoaderOptions o =
        configured_loader(cfg.data, batch, cfg.data.drop_last, workers, torch::kCPU,
                          channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous,
                          static_cast<uint64_t>(cfg.job.seed));
    o.normalize = normalize;
    BatchLoader loader(ds.train, indices, o);
    auto first = loader.next();
    for (int64_t i = 1; i < skip; ++i) loader.next();
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    int64_t images = 0, timed = 0;
    double checksum = 0;
    for (; timed < batches; ++timed) {
      const auto b = loader.next();
      if (!b) break;
      images += b->size();
      checksum += b->images[0][0][0][0].item<double>();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = process_cpu_seconds() - cpu_start;
    std::printf(
        "{\"images_per_s\": %.2f, \"cpu_s_per_image\": %.6f, \"images\": %lld, \"batches\": %lld, "
        "\"seconds\": %.3f, \"cpu_seconds\": %.3f, \"workers\": %lld, \"prefetch\": %lld, \"shape\": [%lld, "
        "%lld, %lld], \"checksum\": %.4f}\n",
        static_cast<double>(images) / seconds, cpu / static_cast<double>(std::max<int64_t>(images, 1)),
        static_cast<long long>(images), static_cast<long long>(timed), seconds, cpu, static_cast<long long>(workers),
        static_cast<long long>(o.prefetch), static_cast<long long>(first->images.size(1)),
        static_cast<long long>(first->images.size(2)), static_cast<long long>(first->images.size(3)), checksum);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
