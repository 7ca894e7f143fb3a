// Tests for strict config loading: bad files and overrides (location, key, hint), good configs and round trips.
#include "config/config.h"
#include "data/idx.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace ddp {
namespace {

struct BadCase {
  std::string name;
  std::string toml;
  std::vector<std::string> overrides;
  std::string prefix;                          // the message starts with this location + ": "
  std::vector<std::string> contains;           // key name, rule, hint ...
  std::vector<std::string> not_contains = {};  // e.g. no hint for far-off names (= {}: entries may omit it)
};

// Runs parse_config and returns the ConfigError message, or "" (with a test failure) if it did not throw.
std::string config_error(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(toml, "bad.toml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << toml;
  return "";
}

void expect_bad(const BadCase& c) {
  SCOPED_TRACE(c.name);
  std::string msg = config_error(c.toml, c.overrides);
  EXPECT_EQ(msg.rfind(c.prefix + ": ", 0), 0u) << "message: " << msg << "\nexpected prefix: " << c.prefix;
  for (const auto& s : c.contains) EXPECT_NE(msg.find(s), std::string::npos) << "missing \"" << s << "\" in: " << msg;
  for (const auto& s : c.not_contains)
    EXPECT_EQ(msg.find(s), std::string::npos) << "unexpected \"" << s << "\" in: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
}

// Locations are LINE:COL of the offending key (unknown names) or value (types, ranges, choices), 1-based.
// `text` n times over.
std::string repeated(const std::string& text, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += text;
  return out;
}

const std::vector<BadCase>& bad_files() {
  static const std::vector<BadCase> cases = {
      // Unknown names, with did-you-mean for near misses.
      {"unknown section near",
       "[dat]\nbatch_size = 1\n",
       {},
       "bad.toml:1:2",
       {"unknown section [dat]", "did you mean [data]?"}},
      {"unknown section far",
       "[frobnicate]\n",
       {},
       "bad.toml:1:2",
       {"[frobnicate]", "sections: job, data"},
       {"did you mean"}},
      {"unknown section prefix", "[optim]\nlr = 0.1\n", {}, "bad.toml:1:2", {"[optim]", "did you mean [optimizer]?"}},
      {"unknown key near",
       "[data]\nbatchsize = 32\n",
       {},
       "bad.toml:2:1",
       {"data.batchsize", "did you mean data.batch_size?"}},
      {"key in wrong section", "[data]\nseed = 1\n", {}, "bad.toml:2:1", {"data.seed", "did you mean job.seed?"}},
      {"key in wrong section 2",
       "[training]\nlr = 0.1\n",
       {},
       "bad.toml:2:1",
       {"training.lr", "did you mean optimizer.lr?"}},
      {"unknown key far",
       "[data]\nzzzzzz = 1\n",
       {},
       "bad.toml:2:1",
       {"data.zzzzzz", "keys of [data]: dataset, dir"},
       {"did you mean"}},
      {"unknown subtable", "[data.extra]\nx = 1\n", {}, "bad.toml:1:7", {"unknown key data.extra"}},
      {"key outside any section",
       "seed = 1\n[job]\n",
       {},
       "bad.toml:1:1",
       {"seed is outside any section", "did you mean job.seed"}},
      {"near key outside any section",
       "batchsize = 1\n",
       {},
       "bad.toml:1:1",
       {"batchsize is outside any section", "data.batch_size"}},
      {"array of tables", "[[data]]\nbatch_size = 1\n", {}, "bad.toml:1:3", {"data must be a table"}},
      // Wrong types.
      {"string for int",
       "[data]\nbatch_size = \"64\"\n",
       {},
       "bad.toml:2:14",
       {"data.batch_size must be an integer", "got string \"64\""}},
      {"float for int",
       "[data]\nbatch_size = 64.0\n",
       {},
       "bad.toml:2:14",
       {"data.batch_size must be an integer", "got float 64.0"}},
      {"bool for int", "[training]\nepochs = true\n", {}, "bad.toml:2:10", {"training.epochs must be an integer"}},
      {"int for bool",
       "[data]\nshuffle = 1\n",
       {},
       "bad.toml:2:11",
       {"data.shuffle must be a boolean", "got integer 1"}},
      {"string for bool", "[amp]\nenabled = \"yes\"\n", {}, "bad.toml:2:11", {"amp.enabled must be a boolean"}},
      {"array for string",
       "[model]\nname = [\"net\"]\n",
       {},
       "bad.toml:2:8",
       {"model.name must be a string", "got an array"}},
      {"table for value",
       "[optimizer]\nlr = { value = 0.1 }\n",
       {},
       "bad.toml:2:6",
       {"optimizer.lr must be a number", "got a table"}},
      {"string for float", "[optimizer]\nlr = \"0.1\"\n", {}, "bad.toml:2:6", {"optimizer.lr must be a number"}},
      {"ints for string list",
       "[data]\nmirrors = [1, 2]\n",
       {},
       "bad.toml:2:11",
       {"data.mirrors must be an array of strings"}},
      {"date for string", "[job]\nname = 2024-01-01\n", {}, "bad.toml:2:8", {"job.name must be a string"}},
      // Out of range.
      {"batch_size 0",
       "[data]\nbatch_size = 0\n",
       {},
       "bad.toml:2:14",
       {"data.batch_size must be >= 1 and <= 1048576, got 0"}},
      {"negative lr", "[optimizer]\nlr = -0.1\n", {}, "bad.toml:2:6", {"optimizer.lr must be > 0", "got -0.1"}},
      {"lr 0", "[optimizer]\nlr = 0.0\n", {}, "bad.toml:2:6", {"optimizer.lr must be > 0"}},
      {"lr inf", "[optimizer]\nlr = inf\n", {}, "bad.toml:2:6", {"optimizer.lr must be a finite number"}},
      {"lr nan", "[optimizer]\nlr = nan\n", {}, "bad.toml:2:6", {"optimizer.lr must be a finite number"}},
      {"momentum 1.5",
       "[optimizer]\nmomentum = 1.5\n",
       {},
       "bad.toml:2:12",
       {"optimizer.momentum must be >= 0.0 and <= 1.0", "got 1.5"}},
      {"beta1 1 (AdamW needs < 1)",
       "[optimizer]\nbeta1 = 1.0\n",
       {},
       "bad.toml:2:9",
       {"optimizer.beta1 must be >= 0.0 and < 1.0"}},
      {"negative weight decay",
       "[optimizer]\nweight_decay = -1e-4\n",
       {},
       "bad.toml:2:16",
       {"optimizer.weight_decay must be >= 0.0"}},
      {"dropout 2",
       "[model]\ndropout = 2\n",
       {},
       "bad.toml:2:11",
       {"model.dropout must be -1.0 (unset: the model's default", "or >= 0.0 and <= 1.0, got 2.0"}},
      {"stochastic_depth on a model without it",
       "[model]\nname = \"regnet_y_1_6gf\"\nstochastic_depth = 0.1\n",
       {},
       "bad.toml:3:20",
       {"model.stochastic_depth applies to models with residual blocks torchvision drops at random",
        "model.name = \"regnet_y_1_6gf\" has none"}},
      {"grad_accum_steps 0",
       "[training]\ngrad_accum_steps = 0\n",
       {},
       "bad.toml:2:20",
       {"training.grad_accum_steps must be >= 1"}},
      {"epochs 0",
       "[training]\nepochs = 0\n",
       {},
       "bad.toml:2:10",
       {"training.epochs = 0 trains until training.max_steps, and max_steps = 0 sets no limit"}},
      {"timeout 0", "[dist]\ntimeout_s = 0\n", {}, "bad.toml:2:13", {"dist.timeout_s must be >= 0.001"}},
      {"negative seed",
       "[job]\nseed = -1\n",
       {},
       "bad.toml:2:8",
       {"job.seed must be >= 0 and <= 4611686018427387904, got -1"}},
      {"threads 5000", "[job]\nthreads = 5000\n", {}, "bad.toml:2:11", {"job.threads must be >= 0 and <= 1024"}},
      {"backoff 1 (GradScaler needs < 1)",
       "[amp]\nbackoff_factor = 1.0\n",
       {},
       "bad.toml:2:18",
       {"amp.backoff_factor must be > 0.0 and < 1.0"}},
      {"keep_last 0", "[checkpoint]\nkeep_last = 0\n", {}, "bad.toml:2:13", {"checkpoint.keep_last must be >= 1"}},
      // Every number has an upper bound too; no value overflows the step arithmetic or the allocator.
      {"batch_size 2^63-1",
       "[data]\nbatch_size = 9223372036854775807\n",
       {},
       "bad.toml:2:14",
       {"data.batch_size must be >= 1 and <= 1048576, got 9223372036854775807"}},
      {"epochs 2^63-1",
       "[training]\nepochs = 9223372036854775807\n",
       {},
       "bad.toml:2:10",
       {"training.epochs must be >= 0 and <= 1000000"}},
      {"max_steps huge",
       "[training]\nmax_steps = 9000000000000000000\n",
       {},
       "bad.toml:2:13",
       {"training.max_steps must be"}},
      {"std 0",
       "[data]\nstd = 0\n",
       {},
       "bad.toml:2:7",
       {"data.std must be -1.0 (the dataset's default) or > 0.0 and <= 1000.0, got 0.0"}},
      {"std -0.5", "[data]\nstd = -0.5\n", {}, "bad.toml:2:7", {"data.std must be -1.0 (the dataset's default) or"}},
      {"norm_weight_decay -0.5",
       "[optimizer]\nnorm_weight_decay = -0.5\n",
       {},
       "bad.toml:2:21",
       {"optimizer.norm_weight_decay must be -1.0 (unset: no norm group) or >= 0.0 and <= 100.0, got -0.5"}},
      {"mean 2",
       "[data]\nmean = 2.0\n",
       {},
       "bad.toml:2:8",
       {"data.mean must be -1.0 (the dataset's default) or >= 0.0 and <= 1.0"}},
      {"lr 1e308",
       "[optimizer]\nlr = 1e308\n",
       {},
       "bad.toml:2:6",
       {"optimizer.lr must be > 0.0 and <= 100.0, got 1e+308"}},
      {"out_dir empty", "[job]\nout_dir = \"\"\n", {}, "bad.toml:2:11", {"job.out_dir must not be empty"}},
      {"num_classes 1e10",
       "[model]\nnum_classes = 10000000000\n",
       {},
       "bad.toml:2:15",
       {"model.num_classes must be >= 2 and <= 1000000, got 10000000000"}},
      {"num_classes 1e10 float",
       "[model]\nnum_classes = 1e10\n",
       {},
       "bad.toml:2:15",
       {"model.num_classes must be an integer"}},
      {"synthetic_train_size 1e12",
       "[data]\nsynthetic_train_size = 1000000000000\n",
       {},
       "bad.toml:2:24",
       {"data.synthetic_train_size must be >= 1 and <= 100000000"}},
      {"timeout 1e300",
       "[dist]\ntimeout_s = 1e300\n",
       {},
       "bad.toml:2:13",
       {"dist.timeout_s must be >= 0.001 and <= 604800.0, got 1e+300"}},
      {"seed 2^63-1",
       "[job]\nseed = 9223372036854775807\n",
       {},
       "bad.toml:2:8",
       {"job.seed must be >= 0 and <= 4611686018427387904"}},
      {"init_scale above float32", "[amp]\ninit_scale = 1e39\n", {}, "bad.toml:2:14", {"amp.init_scale must be"}},
      {"bucket_cap_mb huge",
       "[dist]\nbucket_cap_mb = 1e20\n",
       {},
       "bad.toml:2:17",
       {"dist.bucket_cap_mb must be > 0.0 and <= 65536.0"}},
      // Bad choices.
      {"model resnet19",
       "[model]\nname = \"resnet19\"\n",
       {},
       "bad.toml:2:8",
       {"model.name must be one of net, resnet18", "did you mean \"resnet18\"?"}},
      {"optimizer ada",
       "[optimizer]\nname = \"ada\"\n",
       {},
       "bad.toml:2:8",
       {"optimizer.name must be one of sgd, adamw, adam", "did you mean \"adam\"?"}},
      {"dataset underscore",
       "[data]\ndataset = \"fashion_mnist\"\n",
       {},
       "bad.toml:2:11",
       {"data.dataset must be one of", "did you mean \"fashion-mnist\"?"}},
      {"decay cosin",
       "[lr_scheduler]\ndecay = \"cosin\"\n",
       {},
       "bad.toml:2:9",
       {"lr_scheduler.decay must be one of none, cosine, step", "did you mean \"cosine\"?"}},
      {"backend mpi",
       "[dist]\nbackend = \"mpi\"\n",
       {},
       "bad.toml:2:11",
       {"dist.backend must be one of auto, gloo, nccl, got \"mpi\""},
       {"did you mean"}},
      {"dtype float32",
       "[amp]\ndtype = \"float32\"\n",
       {},
       "bad.toml:2:9",
       {"amp.dtype must be one of auto, float16, bfloat16, fp16, bf16", "did you mean \"float16\"?"}},
      {"progress bars",
       "[metrics]\nprogress = \"bars\"\n",
       {},
       "bad.toml:2:12",
       {"metrics.progress must be one of auto, bar, plain, off", "did you mean \"bar\"?"}},
      {"scale_lr sqrt",
       "[optimizer]\nscale_lr = \"sqrt\"\n",
       {},
       "bad.toml:2:12",
       {"optimizer.scale_lr must be one of none, linear"}},
      {"grad_compression fp15",
       "[dist]\ngrad_compression = \"fp15\"\n",
       {},
       "bad.toml:2:20",
       {"dist.grad_compression", "did you mean \"fp16\"?"}},
      {"resume empty",
       "[checkpoint]\nresume = \"\"\n",
       {},
       "bad.toml:2:10",
       {"checkpoint.resume must be one of auto, never or a path"}},
      // TOML syntax errors keep toml++'s location.
      {"unclosed header", "[data\nbatch_size = 1\n", {}, "bad.toml:1:6", {"table header"}},
      {"missing value", "[data]\nbatch_size =\n", {}, "bad.toml:2:13", {"expected value"}},
      {"unterminated string", "[job]\nname = \"abc\n", {}, "bad.toml:2:12", {"string"}},
      {"duplicate key", "[data]\nbatch_size = 1\nbatch_size = 2\n", {}, "bad.toml:3:14", {"batch_size"}},
      // Rules across keys point at the key that breaks them.
      {"download with fashion-mnist",
       "[data]\ndataset = \"fashion-mnist\"\ndownload = true\n",
       {},
       "bad.toml:3:12",
       {"data.download is only supported for dataset \"mnist\""}},
      {"nesterov without momentum",
       "[optimizer]\nnesterov = true\n",
       {},
       "bad.toml:2:12",
       {"optimizer.nesterov needs", "optimizer.momentum > 0"}},
      {"multistep without milestones",
       "[lr_scheduler]\ndecay = \"multistep\"\n",
       {},
       "bad.toml:2:9",
       {"lr_scheduler.decay = \"multistep\" needs lr_scheduler.milestones"}},
      {"milestones with step decay",
       "[lr_scheduler]\ndecay = \"step\"\nmilestones = [10]\n",
       {},
       "bad.toml:3:14",
       {"lr_scheduler.milestones are read by lr_scheduler.decay = \"multistep\" only"}},
      {"milestone 0",
       "[lr_scheduler]\ndecay = \"multistep\"\nmilestones = [5, 0]\n",
       {},
       "bad.toml:3:14",
       {"lr_scheduler.milestones must be >= 1 and <= 1000000000000, got 0"}},
      {"milestone as a float",
       "[lr_scheduler]\ndecay = \"multistep\"\nmilestones = [5, 7.5]\n",
       {},
       "bad.toml:3:14",
       {"lr_scheduler.milestones must be an integer or an array of integers, got float 7.5"}},
      {"more milestones than a list takes",
       "[lr_scheduler]\ndecay = \"multistep\"\nmilestones = [1" + repeated(", 2", 1024) + "]\n",
       {},
       "bad.toml:3:14",
       {"lr_scheduler.milestones takes at most 1024 values, got 1025"}},
      {"empty per-channel list", "[data]\nmean = []\n", {}, "bad.toml:2:8", {"data.mean must not be an empty array"}},
      {"more channels than a per-channel list takes",
       "[data]\nmean = [0.5" + repeated(", 0.5", 4096) + "]\n",
       {},
       "bad.toml:2:8",
       {"data.mean takes at most 4096 values, got 4097"}},
      {"amsgrad with sgd",
       "[optimizer]\namsgrad = true\n",
       {},
       "bad.toml:2:11",
       {"optimizer.amsgrad is taken by optimizer.name = \"adamw\" or \"adam\", not \"sgd\""}},
      {"fused with foreach on",
       "[optimizer]\nfused = true\nforeach = \"on\"\n",
       {},
       "bad.toml:2:9",
       {"optimizer.fused and optimizer.foreach = \"on\" cannot both be set"}},
      // training.cuda_graph: what the captured step cannot hold, each named with the key to change.
      {"cuda_graph on cpu",
       "[optimizer]\nfused = true\n[training]\ncuda_graph = true\n[dist]\ndevice = \"cpu\"\n",
       {},
       "bad.toml:4:14",
       {"training.cuda_graph captures the training step in a CUDA graph", "dist.device = \"cuda\""}},
      {"cuda_graph with gloo",
       "[optimizer]\nfused = true\n[training]\ncuda_graph = true\n[dist]\nbackend = \"gloo\"\n",
       {},
       "bad.toml:4:14",
       {"Gloo's collectives run on the host", "dist.backend = \"nccl\""}},
      {"cuda_graph without fused",
       "[training]\ncuda_graph = true\n",
       {},
       "bad.toml:2:14",
       {"optimizer.name = \"sgd\" with optimizer.fused = true"}},
      {"cuda_graph with adamw",
       "[optimizer]\nname = \"adamw\"\nfused = true\n[training]\ncuda_graph = true\n",
       {},
       "bad.toml:5:14",
       {"optimizer.name = \"sgd\" with optimizer.fused = true"}},
      {"cuda_graph with accumulation",
       "[optimizer]\nfused = true\n[training]\ncuda_graph = true\ngrad_accum_steps = 2\n",
       {},
       "bad.toml:4:14",
       {"training.grad_accum_steps = 1"}},
      {"cuda_graph with sync_batchnorm",
       "[optimizer]\nfused = true\n[training]\ncuda_graph = true\n[model]\nname = \"resnet18\"\n"
       "sync_batchnorm = true\n",
       {},
       "bad.toml:4:14",
       {"model.sync_batchnorm's collectives"}},
      {"cuda_graph with find_unused_parameters",
       "[optimizer]\nfused = true\n[training]\ncuda_graph = true\n[dist]\nfind_unused_parameters = true\n",
       {},
       "bad.toml:4:14",
       {"dist.find_unused_parameters searches the autograd graph"}},
      {"cuda_graph with gradient compression",
       "[optimizer]\nfused = true\n[training]\ncuda_graph = true\n[dist]\ngrad_compression = \"fp16\"\n",
       {},
       "bad.toml:4:14",
       {"DDP communication hooks are not captured"}},
      {"fewer classes than mnist's",
       "[data]\ndataset = \"mnist\"\n[model]\nnum_classes = 5\n",
       {},
       "bad.toml:4:15",
       {"data.dataset = \"mnist\" has 10 classes, but model.num_classes = 5; set model.num_classes >= 10"}},
      {"resize_size with mnist",
       "[data]\ndataset = \"mnist\"\nresize_size = 32\n",
       {},
       "bad.toml:3:15",
       {"data.resize_size applies to data.dataset = ", "only, not \"mnist\""}},
      {"convnext on 28x28 images",
       "[model]\nname = \"convnext_tiny\"\n",
       {},
       "bad.toml:2:8",
       {"model.name = \"convnext_tiny\" downsamples by 32 without padding",
        "data.image_size = 28 is below its smallest side, 32"}},
      {"convnext evaluating on a smaller crop",
       "[data]\ndataset = \"image_folder\"\nimage_size = 64\nval_crop_size = 24\n[model]\nname = \"convnext_tiny\"\n",
       {},
       "bad.toml:4:17",
       {"data.val_crop_size = 24 is below its smallest side, 32"}},
      {"policy interpolation without a policy",
       "[data]\ndataset = \"image_folder\"\nauto_augment_interpolation = \"bilinear\"\n",
       {},
       "bad.toml:3:30",
       {"data.auto_augment_interpolation is read by a data.auto_augment policy only"}},
      {"image_size with mnist",
       "[data]\nimage_size = 32\n",
       {},
       "bad.toml:2:14",
       {"data.image_size applies to datasets \"image_folder\", \"webdataset\" and \"synthetic\" only"}},
      {"deterministic with cudnn_benchmark",
       "[training]\ndeterministic = true\ncudnn_benchmark = true\n",
       {},
       "bad.toml:3:19",
       {"training.cudnn_benchmark picks convolution algorithms by timing them", "set one of them to false"}},
      {"static_graph with accumulation",
       "[dist]\nstatic_graph = true\n[training]\ngrad_accum_steps = 2\n",
       {},
       "bad.toml:2:16",
       {"dist.static_graph takes the graph from DDP's first backward", "use dist.find_unused_parameters = true"}},
      {"powersgd with error feedback from the first step",
       "[dist]\ngrad_compression = \"powersgd\"\npowersgd_start_step = 1\n",
       {},
       "bad.toml:3:23",
       {"DDP rebuilds its buckets after the first step", "set dist.powersgd_start_step > 1"}},
      {"powersgd with skip_zero_gradients",
       "[dist]\ngrad_compression = \"powersgd\"\nskip_zero_gradients = true\n",
       {},
       "bad.toml:2:20",
       {"one communication hook at a time", "set dist.skip_zero_gradients = false"}},
      {"net on 32x32 synthetic",
       "[data]\ndataset = \"synthetic\"\nimage_size = 32\n",
       {},
       "bad.toml:3:14",
       {"model net expects 28x28"}},
      {"3 channels for mnist",
       "[model]\nin_channels = 3\n",
       {},
       "bad.toml:2:15",
       {"data.dataset = \"fashion-mnist\" has 1-channel images, but model.in_channels = 3"}},
      {"1 channel for cifar10",
       "[data]\ndataset = \"cifar10\"\n[model]\nin_channels = 1\n",
       {},
       "bad.toml:4:15",
       {"data.dataset = \"cifar10\" has 3-channel images, but model.in_channels = 1", "or leave it unset"}},
      {"image_size for cifar10",
       "[data]\ndataset = \"cifar10\"\nimage_size = 28\n",
       {},
       "bad.toml:3:14",
       {"data.image_size applies to datasets \"image_folder\", \"webdataset\" and \"synthetic\" only",
        "has 32x32 images"}},
      {"two means for three channels",
       "[data]\ndataset = \"cifar10\"\nmean = [0.5, 0.5]\n",
       {},
       "bad.toml:3:8",
       {"data.mean has 2 values for 3-channel images; give one value, or one per channel"}},
      {"a mean list with the default marker",
       "[data]\nmean = [-1]\n",
       {},
       "bad.toml:2:8",
       {"data.mean: -1.0 (the dataset's default) stands alone, not in a list"}},
      // Dist settings that contradict each other on any machine fail at load, not when the ranks start.
      {"nccl on cpu",
       "[dist]\ndevice = \"cpu\"\nbackend = \"nccl\"\n",
       {},
       "bad.toml:3:11",
       {"dist.backend = \"nccl\" runs on CUDA devices, but dist.device = \"cpu\""}},
      {"shm with nccl",
       "[dist]\nbackend = \"nccl\"\nallreduce = \"shm\"\n",
       {},
       "bad.toml:3:13",
       {"dist.allreduce = \"shm\" is for the gloo backend", "these dist settings choose nccl"}},
      {"shm on cuda with auto backend",
       "[dist]\ndevice = \"cuda\"\nallreduce = \"shm\"\n",
       {},
       "bad.toml:3:13",
       {"dist.allreduce = \"shm\" is for the gloo backend"}},
      {"hierarchical with nccl",
       "[dist]\nbackend = \"nccl\"\nallreduce = \"hierarchical\"\n",
       {},
       "bad.toml:3:13",
       {"dist.allreduce = \"hierarchical\" is for the gloo backend",
        "NCCL has its own intra-host transport and topology"}},
      // The first error in file order is the one reported (toml++ iterates tables sorted by name).
      {"first error in file order", "[job]\nseed = -5\n[data]\nbatch_size = 0\n", {}, "bad.toml:2:8", {"job.seed"}},
  };
  return cases;
}

const std::vector<BadCase>& bad_overrides() {
  static const std::vector<BadCase> cases = {
      {"unknown key",
       "",
       {"data.batchsize=3"},
       "--data.batchsize=3",
       {"unknown key data.batchsize", "did you mean data.batch_size?"}},
      {"unknown section",
       "",
       {"dat.batch_size=3"},
       "--dat.batch_size=3",
       {"unknown section [dat]", "did you mean [data]?"}},
      {"key in wrong section", "", {"data.seed=3"}, "--data.seed=3", {"did you mean job.seed?"}},
      {"not an integer",
       "",
       {"data.batch_size=abc"},
       "--data.batch_size=abc",
       {"data.batch_size must be an integer", "\"abc\""}},
      {"batch_size 0",
       "",
       {"data.batch_size=0"},
       "--data.batch_size=0",
       {"data.batch_size must be >= 1 and <= 1048576, got 0"}},
      {"missing =", "", {"data.batch_size"}, "--data.batch_size", {"must look like --section.key=value"}},
      {"no section",
       "",
       {"batch_size=3"},
       "--batch_size=3",
       {"must name section.key", "did you mean --data.batch_size=3?"}},
      {"too many dots", "", {"data.batch.size=3"}, "--data.batch.size=3", {"must name section.key"}},
      {"float for int",
       "",
       {"data.batch_size=2.5"},
       "--data.batch_size=2.5",
       {"data.batch_size must be an integer", "got float 2.5"}},
      {"quoted string for int",
       "",
       {"data.batch_size=\"8\""},
       "--data.batch_size=\"8\"",
       {"data.batch_size must be an integer"}},
      {"word for bool", "", {"data.shuffle=yes"}, "--data.shuffle=yes", {"data.shuffle must be a boolean"}},
      {"int for bool", "", {"data.shuffle=1"}, "--data.shuffle=1", {"data.shuffle must be a boolean"}},
      {"bare word bad choice",
       "",
       {"model.name=resnet19"},
       "--model.name=resnet19",
       {"model.name must be one of", "did you mean \"resnet18\"?"}},
      {"negative lr", "", {"optimizer.lr=-1"}, "--optimizer.lr=-1", {"optimizer.lr must be > 0"}},
      {"multi-line value",
       "",
       {"data.batch_size=3\n[job]\nseed=-1"},
       "--data.batch_size=3 [job] seed=-1",
       {"must be on one line"}},
      {"override breaks a rule",
       "",
       {"data.download=true"},
       "--data.download=true",
       {"data.download is only supported"}},
      // The shard keys: both splits' patterns for webdataset, none of them elsewhere (at a default they pass, as
      // --print-config writes every key).
      {"webdataset without val_shards",
       "",
       {"data.dataset=webdataset", "data.train_shards=/d/t-{0..3}.tar"},
       "--data.dataset=webdataset",
       {"data.dataset = \"webdataset\" needs data.val_shards"}},
      {"shards for another dataset",
       "",
       {"data.train_shards=/d/t-{0..3}.tar"},
       "--data.train_shards=/d/t-{0..3}.tar",
       {"data.train_shards applies to data.dataset = \"webdataset\" only, not data.dataset = \"fashion-mnist\""}},
      {"shuffle buffer for another dataset",
       "",
       {"data.shuffle_buffer=10"},
       "--data.shuffle_buffer=10",
       {"data.shuffle_buffer applies to data.dataset = \"webdataset\" only"}},
      {"class names for another dataset",
       "",
       {"data.class_names=c.txt"},
       "--data.class_names=c.txt",
       {"data.class_names applies to data.dataset = \"webdataset\" only"}},
      {"shard retries for another dataset",
       "",
       {"data.shard_retries=5"},
       "--data.shard_retries=5",
       {"data.shard_retries applies to data.dataset = \"webdataset\" only"}},
      {"repeated augmentation of shards",
       "",
       {"data.dataset=webdataset", "data.train_shards=t.tar", "data.val_shards=v.tar", "data.ra_reps=3"},
       "--data.ra_reps=3",
       {"data.ra_reps repeats samples of a random-access split", "set ra_reps = 0"}},
      {"override gives nccl on cpu",
       "[dist]\ndevice = \"cpu\"\n",
       {"dist.backend=nccl"},
       "--dist.backend=nccl",
       {"runs on CUDA devices"}},
      // An override parses as the TOML value it replaces; "[" opens an array that never closes.
      {"unclosed array for a list",
       "",
       {"data.mirrors=["},
       "--data.mirrors=[",
       {"data.mirrors must be an array of strings"}},
      {"unclosed string for a list",
       "",
       {"data.mirrors=\"http://a/"},
       "--data.mirrors=\"http://a/",
       {"data.mirrors must be"}},
      {"batch_size 2^63-1",
       "",
       {"data.batch_size=9223372036854775807"},
       "--data.batch_size=9223372036854775807",
       {"data.batch_size must be >= 1 and <= 1048576"}},
      {"timeout 1e300",
       "",
       {"dist.timeout_s=1e300"},
       "--dist.timeout_s=1e300",
       {"dist.timeout_s must be >= 0.001 and <= 604800.0"}},
      {"timeout below a millisecond",
       "",
       {"dist.timeout_s=0.0004"},
       "--dist.timeout_s=0.0004",
       {"dist.timeout_s must be >= 0.001 and <= 604800.0, got 0.0004"}},
      {"std 0", "", {"data.std=0"}, "--data.std=0", {"data.std must be -1.0 (the dataset's default) or > 0.0"}},
      {"out_dir empty", "", {"job.out_dir="}, "--job.out_dir=", {"job.out_dir must not be empty"}},
      {"override checked after a good file",
       "[data]\nbatch_size = 8\n",
       {"data.batch_size=-8"},
       "--data.batch_size=-8",
       {"data.batch_size"}},
  };
  return cases;
}

TEST(ConfigBad, FilesFailWithLocationKeyAndHint) {
  ASSERT_GE(bad_files().size(), 35u);
  for (const auto& c : bad_files()) expect_bad(c);
}

TEST(ConfigBad, OverridesFailWithTheOverrideAsLocation) {
  ASSERT_GE(bad_overrides().size(), 8u);
  for (const auto& c : bad_overrides()) expect_bad(c);
}

TEST(ConfigBad, EveryCaseIsDistinct) {
  std::set<std::pair<std::string, std::vector<std::string>>> seen;
  for (const auto* table : {&bad_files(), &bad_overrides()})
    for (const auto& c : *table) EXPECT_TRUE(seen.insert({c.toml, c.overrides}).second) << c.name;
}

TEST(ConfigBad, LoadConfigRejectsMissingFilesAndDirectories) {
  test::TempDir dir;
  try {
    load_config(dir / "nope.toml");
    FAIL() << "missing file accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir / "nope.toml: cannot open config file", 0), 0u) << e.what();
  }
  try {
    load_config(dir.path());
    FAIL() << "directory accepted as a config";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir.path() + ": is a directory", 0), 0u) << e.what();
  }
}

// A device, a FIFO or an oversized file is refused by its path without reading it all (/dev/urandom would never
// end).
TEST(ConfigBad, LoadConfigRefusesNonRegularAndOversizedFiles) {
  auto error = [](const std::string& path) { return test::error_of([&] { load_config(path); }); };
  EXPECT_EQ(error("/dev/urandom"), "/dev/urandom: is not a regular file (a device, pipe or socket); give a TOML file");
  EXPECT_EQ(error("/dev/null").rfind("/dev/null: is not a regular file", 0), 0u);
  test::TempDir dir;
  const std::string fifo = dir / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error(fifo).rfind(fifo + ": is not a regular file", 0), 0u);  // returns: no writer is waited for
  const std::string big = dir / "big.toml";
  test::write_file(big, "# " + std::string(kMaxConfigBytes, 'x') + "\n");
  EXPECT_EQ(error(big), big + ": config file is larger than 1 MiB; a config is a short TOML file");
  // Exactly at the limit is still read.
  test::write_file(big, "#" + std::string(kMaxConfigBytes - 2, 'x') + "\n");
  EXPECT_EQ(read_config_file(big).size(), kMaxConfigBytes);
}

TEST(ConfigBad, LoadConfigReportsThePathItWasGiven) {
  test::TempDir dir;
  test::write_file(dir / "run.toml", "[data]\nbatch_size = 0\n");
  try {
    load_config(dir / "run.toml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir / "run.toml:2:14: data.batch_size", 0), 0u) << e.what();
  }
}

TEST(ConfigGood, EmptyFileGivesTheDocumentedDefaults) {
  Config cfg = parse_config("", "empty.toml");
  Config defaults;
  EXPECT_EQ(cfg.source, "empty.toml");
  EXPECT_EQ(cfg.data.batch_size, defaults.data.batch_size);
  EXPECT_EQ(cfg.data.dataset.name, "fashion-mnist");
  EXPECT_EQ(cfg.data.dir, test::fashion_mnist_dir());
  EXPECT_EQ(cfg.model.name.name, defaults.model.name.name);
  EXPECT_EQ(cfg.optimizer.lr, defaults.optimizer.lr);
  EXPECT_EQ(cfg.training.epochs, defaults.training.epochs);
  EXPECT_EQ(cfg.checkpoint.dir, defaults.job.out_dir + "/checkpoints");
  // The dataset's normalisation replaces the "< 0 = dataset default" markers.
  ASSERT_EQ(cfg.data.mean.size(), 1u);
  EXPECT_GT(cfg.data.mean[0], 0);
  ASSERT_EQ(cfg.data.std.size(), 1u);
  EXPECT_GT(cfg.data.std[0], 0);
}

// The resolved Fashion-MNIST defaults are the training set's pixel statistics (rounded to 4 places).
TEST(ConfigGood, FashionMnistDefaultNormalisationIsTheTrainingSetStatistics) {
  const std::string images = test::fashion_mnist_dir() + "/train-images-idx3-ubyte.gz";
  if (!std::filesystem::exists(images)) GTEST_SKIP() << images << " not present";
  torch::Tensor x = read_idx(images).to(torch::kFloat64).div(255);
  Config cfg = parse_config("", "empty.toml");
  EXPECT_NEAR(cfg.data.mean[0], x.mean().item<double>(), 5e-5);
  EXPECT_NEAR(cfg.data.std[0], x.std(/*unbiased=*/false).item<double>(), 5e-5);
}

TEST(ConfigGood, EveryShippedConfigLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/configs")) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    ++count;
    Config cfg;
    ASSERT_NO_THROW(cfg = load_config(entry.path().string()));
    EXPECT_EQ(cfg.source, entry.path().string());
    std::string text = format_config(cfg);
    EXPECT_EQ(format_config(parse_config(text, "printed.toml")), text);
  }
  EXPECT_GE(count, 1);
}

TEST(ConfigGood, FileValuesAreApplied) {
  Config cfg = parse_config(
      "[job]\nseed = 7\n[data]\nbatch_size = 32\nshuffle = false\nmirrors = [\"http://a/\", \"http://b/\"]\n"
      "[optimizer]\nname = \"adamw\"\nlr = 1\n[model]\nname = \"resnet18\"\n",
      "good.toml");
  EXPECT_EQ(cfg.job.seed, 7);
  EXPECT_EQ(cfg.data.batch_size, 32);
  EXPECT_FALSE(cfg.data.shuffle);
  EXPECT_EQ(cfg.data.mirrors, (std::vector<std::string>{"http://a/", "http://b/"}));
  EXPECT_EQ(cfg.optimizer.name.name, "adamw");
  EXPECT_EQ(cfg.optimizer.lr, 1.0);  // an integer is accepted for a float key
  EXPECT_EQ(cfg.model.name.name, "resnet18");
}

TEST(ConfigOverrides, AreTypedLikeTheValueTheyReplace) {
  Config cfg = parse_config("", "x.toml",
                            {"model.name=resnet18", "optimizer.name=\"adamw\"", "optimizer.lr=1", "data.shuffle=false",
                             "job.name=2024", "data.dir=/tmp/with space", "data.mirrors=[\"http://a/\", \"http://b/\"]",
                             "checkpoint.resume=runs/x/ckpt.pt", "data.mean=0.5", "training.epochs=3"});
  EXPECT_EQ(cfg.model.name.name, "resnet18");   // bare word for a choice key
  EXPECT_EQ(cfg.optimizer.name.name, "adamw");  // quoted string
  EXPECT_EQ(cfg.optimizer.lr, 1.0);             // int for float
  EXPECT_FALSE(cfg.data.shuffle);               // bool
  EXPECT_EQ(cfg.job.name, "2024");              // a word TOML reads as a number stays a string for a string key
  EXPECT_EQ(cfg.data.dir, "/tmp/with space");
  EXPECT_EQ(cfg.data.mirrors, (std::vector<std::string>{"http://a/", "http://b/"}));
  EXPECT_EQ(cfg.checkpoint.resume.mode, ResumeMode::Path);  // a path where a choice is allowed to be one
  EXPECT_EQ(cfg.checkpoint.resume.path, "runs/x/ckpt.pt");
  EXPECT_EQ(cfg.data.mean, PerChannel{0.5});
  EXPECT_EQ(cfg.training.epochs, 3);
}

// An integer list (lr_scheduler.milestones): an array, one integer, or [] (the default), from a file or an override.
TEST(ConfigGood, IntegerListTakesAnArrayOrOneInteger) {
  const Config file = parse_config("[lr_scheduler]\ndecay = \"multistep\"\nmilestones = [30, 60, 30]\n", "x.toml");
  EXPECT_EQ(file.lr_scheduler.milestones, (std::vector<int64_t>{30, 60, 30}));  // as given: a repeat decays twice
  EXPECT_EQ(parse_config("", "x.toml").lr_scheduler.milestones, std::vector<int64_t>{});
  EXPECT_EQ(
      parse_config("", "x.toml", {"lr_scheduler.decay=multistep", "lr_scheduler.milestones=7"}).lr_scheduler.milestones,
      std::vector<int64_t>{7});
  EXPECT_EQ(parse_config("", "x.toml", {"lr_scheduler.decay=multistep", "lr_scheduler.milestones=[1, 2]"})
                .lr_scheduler.milestones,
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(test::error_of([] { parse_config("", "x.toml", {"lr_scheduler.milestones=1,2"}); }),
            "--lr_scheduler.milestones=1,2: lr_scheduler.milestones must be an integer or an array of integers, got "
            "\"1,2\"");
  // A long override is quoted by its first 80 characters.
  const std::string many = "lr_scheduler.milestones=[1" + repeated(", 2", 1024) + "]";
  EXPECT_EQ(test::error_of([&] { parse_config("", "x.toml", {many}); }),
            "--" + many.substr(0, 80) + "...: lr_scheduler.milestones takes at most 1024 values, got 1025");
  const std::string word = repeated("0.5", 40);  // read as a bare word, not a number
  EXPECT_EQ(test::error_of([&] { parse_config("", "x.toml", {"data.mean=" + word}); }),
            "--" + ("data.mean=" + word).substr(0, 80) +
                "...: data.mean must be a number or an array of numbers (one per image channel), got \"" +
                word.substr(0, 80) + "...\"");
}

TEST(ConfigOverrides, ListKeyTakesAnArrayOrOneBareWord) {
  EXPECT_EQ(parse_config("", "x.toml", {"data.mirrors=http://a/"}).data.mirrors,
            (std::vector<std::string>{"http://a/"}));
  EXPECT_EQ(parse_config("", "x.toml", {"data.mirrors=[]"}).data.mirrors, std::vector<std::string>{});
  EXPECT_EQ(parse_config("", "x.toml", {"data.mirrors=[\"a\"]"}).data.mirrors, std::vector<std::string>{"a"});
}

// An integer or "auto" (data.workers): from a file or an override, printed back as given; anything else is refused.
TEST(ConfigGood, IntOrAutoTakesAnIntegerOrAuto) {
  const Config file = parse_config("[data]\nworkers = \"auto\"\n", "x.toml");
  EXPECT_TRUE(file.data.workers.automatic);
  EXPECT_NE(format_config(file).find("\nworkers = \"auto\"\n"), std::string::npos);
  EXPECT_EQ(format_config(parse_config(format_config(file), "p.toml")), format_config(file));
  EXPECT_TRUE(parse_config("", "x.toml", {"data.workers=auto"}).data.workers.automatic);
  const Config number = parse_config("", "x.toml", {"data.workers=3"});
  EXPECT_FALSE(number.data.workers.automatic);
  EXPECT_EQ(number.data.workers.value, 3);
  EXPECT_NE(format_config(number).find("\nworkers = 3\n"), std::string::npos);
  const Config defaults = parse_config("", "x.toml");
  EXPECT_FALSE(defaults.data.workers.automatic);
  EXPECT_EQ(defaults.data.workers.value, 1);
  EXPECT_EQ(test::error_of([] { parse_config("", "x.toml", {"data.workers=many"}); }),
            "--data.workers=many: data.workers must be an integer or \"auto\", got string \"many\"");
  EXPECT_EQ(test::error_of([] { parse_config("", "x.toml", {"data.workers=65"}); }),
            "--data.workers=65: data.workers must be >= 0 and <= 64, got 65");
  EXPECT_EQ(test::error_of([] { parse_config("[data]\nworkers = 1.5\n", "x.toml"); }),
            "x.toml:2:11: data.workers must be an integer or \"auto\", got float 1.5");
}

// A boolean or "auto" (training.cudnn_benchmark, default "auto"): from a file or an override, printed back as given;
// an explicit true with training.deterministic is refused, "auto" with it is not.
TEST(ConfigGood, BoolOrAutoTakesABooleanOrAuto) {
  const Config defaults = parse_config("", "x.toml");
  EXPECT_TRUE(defaults.training.cudnn_benchmark.automatic);
  EXPECT_NE(format_config(defaults).find("\ncudnn_benchmark = \"auto\"\n"), std::string::npos);
  EXPECT_EQ(format_config(parse_config(format_config(defaults), "p.toml")), format_config(defaults));
  const Config off = parse_config("[training]\ncudnn_benchmark = false\n", "x.toml");
  EXPECT_FALSE(off.training.cudnn_benchmark.automatic);
  EXPECT_FALSE(off.training.cudnn_benchmark.value);
  EXPECT_NE(format_config(off).find("\ncudnn_benchmark = false\n"), std::string::npos);
  const Config on = parse_config("", "x.toml", {"training.cudnn_benchmark=true"});
  EXPECT_FALSE(on.training.cudnn_benchmark.automatic);
  EXPECT_TRUE(on.training.cudnn_benchmark.value);
  EXPECT_TRUE(parse_config("", "x.toml", {"training.cudnn_benchmark=auto"}).training.cudnn_benchmark.automatic);
  EXPECT_TRUE(parse_config("[training]\ndeterministic = true\ncudnn_benchmark = \"auto\"\n", "x.toml")
                  .training.cudnn_benchmark.automatic);
  EXPECT_EQ(test::error_of([] { parse_config("", "x.toml", {"training.cudnn_benchmark=sometimes"}); }),
            "--training.cudnn_benchmark=sometimes: training.cudnn_benchmark must be a boolean (true/false) or "
            "\"auto\", got string \"sometimes\"");
  EXPECT_EQ(test::error_of([] { parse_config("[training]\ncudnn_benchmark = 1\n", "x.toml"); }),
            "x.toml:2:19: training.cudnn_benchmark must be a boolean (true/false) or \"auto\", got integer 1");
}

// data.decode: cpu by default; gpu is refused with dist.device = "cpu" (auto is not: it means cpu there).
TEST(ConfigGood, DataDecodeChoicesAndTheirDeviceRule) {
  EXPECT_EQ(parse_config("", "x.toml").data.decode, DecodeChoice::Cpu);
  EXPECT_EQ(parse_config("", "x.toml", {"data.decode=gpu"}).data.decode, DecodeChoice::Gpu);
  EXPECT_EQ(parse_config("", "x.toml", {"data.decode=auto", "dist.device=cpu"}).data.decode, DecodeChoice::Auto);
  EXPECT_EQ(test::error_of([] { parse_config("[data]\ndecode = \"gpu\"\n[dist]\ndevice = \"cpu\"\n", "x.toml"); }),
            "x.toml:2:10: data.decode = \"gpu\" decodes JPEGs with nvJPEG on the training GPU, but dist.device = "
            "\"cpu\"; use data.decode = \"cpu\" or \"auto\" on CPU");
  EXPECT_EQ(test::error_of([] { parse_config("", "x.toml", {"data.decode=nvjpeg"}); }),
            "--data.decode=nvjpeg: data.decode must be one of cpu, gpu, auto, got \"nvjpeg\"");
}

// -1 stays the "dataset's default" marker for data.mean and data.std; 0 for std is refused (above).
TEST(ConfigGood, DefaultMarkerResolvesToTheDatasetStatistics) {
  Config cfg = parse_config("[data]\nmean = -1\nstd = -1\n", "x.toml");
  Config defaults = parse_config("", "x.toml");
  EXPECT_EQ(cfg.data.mean, defaults.data.mean);
  EXPECT_EQ(cfg.data.std, defaults.data.std);
  ASSERT_EQ(cfg.data.std.size(), 1u);
  EXPECT_GT(cfg.data.std[0], 0);
  EXPECT_EQ(parse_config("[data]\nstd = 0.5\nmean = 0\n", "x.toml").data.std, PerChannel{0.5});
}

// Every number has a finite lower and upper bound, and --help states it.
TEST(ConfigKeys, EveryNumberHasADocumentedRange) {
  int numbers = 0;
  for (const KeyInfo& f : describe_keys(Config{})) {
    if (f.kind != KeyKind::Int && f.kind != KeyKind::Float && f.kind != KeyKind::Floats && f.kind != KeyKind::Ints &&
        f.kind != KeyKind::IntOrAuto)
      continue;
    ++numbers;
    SCOPED_TRACE(f.section + "." + f.name);
    EXPECT_TRUE(std::isfinite(f.min));
    EXPECT_TRUE(std::isfinite(f.max));
    EXPECT_NE(f.allowed.find(" and "), std::string::npos) << f.allowed;
  }
  EXPECT_GE(numbers, 35);
}

// Every key says what it does, in one line.
TEST(ConfigKeys, EveryKeyHasOneLineOfDoc) {
  std::set<std::string> names;
  for (const KeyInfo& f : describe_keys(Config{})) {
    SCOPED_TRACE(f.section + "." + f.name);
    EXPECT_GE(f.doc.size(), 8u);
    EXPECT_EQ(f.doc.find('\n'), std::string::npos);
    EXPECT_TRUE(names.insert(f.section + "." + f.name).second) << "declared twice";
  }
}

TEST(ConfigOverrides, TakePrecedenceOverTheFileAndTheLastOneWins) {
  const std::string file = "[data]\nbatch_size = 32\n[optimizer]\nlr = 0.5\n";
  EXPECT_EQ(parse_config(file, "f.toml").data.batch_size, 32);
  Config cfg = parse_config(file, "f.toml", {"data.batch_size=128", "optimizer.lr=0.25", "data.batch_size=256"});
  EXPECT_EQ(cfg.data.batch_size, 256);
  EXPECT_EQ(cfg.optimizer.lr, 0.25);
}

TEST(ConfigOverrides, CanFixWhatTheFileBreaksAcrossKeys) {
  // The rules across keys are checked on the final values, so an override can make a file consistent.
  Config cfg = parse_config("[optimizer]\nnesterov = true\n", "f.toml", {"optimizer.momentum=0.9"});
  EXPECT_TRUE(cfg.optimizer.hyper.flag("nesterov"));
  EXPECT_EQ(cfg.optimizer.hyper.number("momentum"), 0.9);
}

TEST(ConfigPrint, ListsEveryKeyOfEverySection) {
  Config cfg = parse_config("", "x.toml");
  std::string text = format_config(cfg);
  for (const KeyInfo& f : describe_keys(Config{})) {
    size_t at = text.find("[" + f.section + "]\n");
    ASSERT_NE(at, std::string::npos) << f.section;
    size_t end = text.find("\n[", at + 1);
    std::string body = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    EXPECT_NE(body.find("\n" + f.name + " = "), std::string::npos) << f.section << "." << f.name;
  }
}

TEST(ConfigPrint, RoundTripsThroughParse) {
  const std::vector<std::string> files = {
      "",
      "[job]\nname = \"quote \\\" backslash \\\\ tab \\t nl \\n del \\u007f é\"\nseed = 123456789012\n"
      "[data]\ndataset = \"mnist\"\ndownload = true\nmirrors = [\"http://x/\", \"\"]\n"
      "mean = 0.1\nstd = 0.30000000000000004\n"
      "[optimizer]\nname = \"adamw\"\nlr = 3e-4\neps = 1e-12\nbeta2 = 0.95\n"
      "[lr_scheduler]\ndecay = \"cosine\"\nmin_lr = 1e-300\n"
      "[checkpoint]\nresume = \"/some/where.pt\"\n",
      "[data]\ndataset = \"synthetic\"\nimage_size = 64\n[model]\nname = \"resnet50\"\nin_channels = 3\n",
  };
  for (const auto& file : files) {
    SCOPED_TRACE(file);
    Config cfg = parse_config(file, "in.toml");
    std::string printed = format_config(cfg);
    Config again;
    ASSERT_NO_THROW(again = parse_config(printed, "printed.toml")) << printed;
    EXPECT_EQ(format_config(again), printed);
  }
  // Strings survive byte for byte.
  Config cfg = parse_config("[job]\nname = \"a\\\"b\\\\c\\td\\u007fe\\u0001\"\n", "in.toml");
  EXPECT_EQ(parse_config(format_config(cfg), "p.toml").job.name, std::string("a\"b\\c\td\x7f"
                                                                             "e\x01"));
}

// A choice key is an enum (or a row's name) once loaded. Every name --help lists for it parses, and --print-config
// writes the value's own name back (an alias such as amp.dtype's fp16 as float16), which parses to the same value
// again.
TEST(ConfigChoices, EveryNameParsesToAValueThatPrintsItsOwnName) {
  int keys = 0;
  for (const KeyInfo& f : describe_keys(Config{})) {
    if (f.kind != KeyKind::Choice) continue;
    ++keys;
    const std::string key = f.section + "." + f.name;
    ASSERT_FALSE(f.choices.empty()) << key;
    std::set<std::string> printed_names;
    for (const std::string& name : f.choices) {
      SCOPED_TRACE(key + " = " + name);
      // shm is refused beside a backend that may choose nccl, so that key gets gloo beside it.
      std::vector<std::string> overrides{key + "=" + name};
      if (key == "dist.allreduce") overrides.push_back("dist.backend=gloo");
      if (key == "data.dataset") overrides.push_back("model.name=resnet18");  // net takes 28x28 images only
      if (key == "data.dataset" && dataset_row(name).shards)
        overrides.insert(overrides.end(), {"data.train_shards=t.tar", "data.val_shards=v.tar"});
      if (key == "data.interpolation" || key == "data.auto_augment")  // an image folder's keys
        overrides.insert(overrides.end(), {"data.dataset=image_folder", "model.name=resnet18"});
      if (key == "data.auto_augment_interpolation")  // a policy's
        overrides.insert(overrides.end(),
                         {"data.dataset=image_folder", "model.name=resnet18", "data.auto_augment=ta_wide"});
      if (key == "model.name" && name == "torchscript") overrides.push_back("model.path=m.pt");
      if (key == "model.name" && name == "plugin") overrides.push_back("model.library=m.so");
      // A model whose row refuses the default dataset's 28x28 images (a ViT: whole patches) is shown 224x224 ones.
      if (key == "model.name" && model_row(name).check && model_row(name).check(parse_config("", "c.toml")))
        overrides.insert(overrides.end(), {"data.dataset=synthetic", "data.image_size=224"});
      if (key == "lr_scheduler.decay" && name == "multistep") overrides.push_back("lr_scheduler.milestones=[5]");
      const Config cfg = parse_config("", "c.toml", overrides);
      const std::string text = format_config(cfg);
      const size_t at = text.find("\n" + f.name + " = \"", text.find("[" + f.section + "]\n"));
      ASSERT_NE(at, std::string::npos);
      const size_t from = at + f.name.size() + 5;
      const std::string printed = text.substr(from, text.find('"', from) - from);
      EXPECT_NE(std::find(f.choices.begin(), f.choices.end(), printed), f.choices.end()) << printed;
      printed_names.insert(printed);
      EXPECT_EQ(format_config(parse_config(format_config(cfg), "p.toml")), format_config(cfg));
    }
    EXPECT_EQ(printed_names.size(), f.choices.size() - (key == "amp.dtype" ? 2 : 0))
        << key << ": names that print as another";
  }
  EXPECT_EQ(keys, 26);
  // The aliases print as the name they stand for.
  EXPECT_EQ(parse_config("[amp]\ndtype = \"fp16\"\n", "a.toml").amp.dtype, AmpDtype::Float16);
  EXPECT_NE(format_config(parse_config("[amp]\ndtype = \"bf16\"\n", "a.toml")).find("dtype = \"bfloat16\""),
            std::string::npos);
  EXPECT_EQ(parse_config("", "d.toml").checkpoint.resume.mode, ResumeMode::Auto);
}

TEST(ConfigHints, ClosestMatchSuggestsOnlyNearNames) {
  const std::vector<std::string> names = {"batch_size", "eval_batch_size", "shuffle"};
  EXPECT_EQ(closest_match("batchsize", names), "batch_size");
  EXPECT_EQ(closest_match("shufle", names), "shuffle");
  EXPECT_EQ(closest_match("zzzzzz", names), "");
}

// The key table of docs/configuration.md is what the declarations make of it (scripts/update-docs writes it).
TEST(ConfigReference, DocsKeyTableIsCurrent) {
  const std::string page = test::read_file(test::source_dir() + "/docs/configuration.md");
  const std::string begin = "<!-- config keys: begin -->\n", end = "<!-- config keys: end -->\n";
  const size_t from = page.find(begin), to = page.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/configuration.md has no " << begin;
  ASSERT_NE(to, std::string::npos) << "docs/configuration.md has no " << end;
  const std::string table = page.substr(from + begin.size(), to - from - begin.size());
  EXPECT_EQ(table, config_markdown()) << "docs/configuration.md's config key table is stale: run scripts/update-docs";
  // One row per key, each naming its key.
  for (const KeyInfo& k : describe_keys(Config{}))
    EXPECT_NE(table.find("| `" + k.section + "." + k.name + "` |"), std::string::npos) << k.section << "." << k.name;
}

}  // namespace
}  // namespace ddp

namespace ddp {
namespace {

TEST(ConfigRetiredKeys, AreReadAndIgnoredFromFilesAndOverrides) {
  const Config old_file = parse_config("[job]\nstep_memory = \"planned\"\nseed = 3\n", "old.toml");
  EXPECT_EQ(old_file.job.seed, 3);
  EXPECT_EQ(format_config(old_file), format_config(parse_config("[job]\nseed = 3\n", "new.toml")));
  EXPECT_EQ(format_config(old_file).find("step_memory"), std::string::npos);
  const Config overridden = parse_config("", "c.toml", {"job.step_memory=malloc"});
  EXPECT_EQ(format_config(overridden), format_config(parse_config("", "c.toml")));
  // Only the retired key itself: a misspelling of it is an unknown key as ever.
  EXPECT_THROW(parse_config("[job]\nstep_memroy = \"malloc\"\n", "typo.toml"), ConfigError);
  EXPECT_THROW(parse_config("[data]\nstep_memory = \"malloc\"\n", "elsewhere.toml"), ConfigError);
  EXPECT_NE(config_markdown().find("- `job.step_memory`: "), std::string::npos);
}

}  // namespace
}  // namespace ddp

namespace ddp {
namespace {

TEST(ConfigFiles, EveryConfigUsersCopyLoads) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/configs")) {
    EXPECT_NO_THROW(load_config(entry.path().string())) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 4);
}

}  // namespace
}  // namespace ddp
