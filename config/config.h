// Run configuration: one struct per TOML section, each key declared once beside its field; loading and printing.
#pragma once

#include "config/choices.h"
#include "config/dataset_rows.h"
#include "config/key.h"
#include "config/model_rows.h"
#include "config/optimizer_rows.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ddp {

// A section lists its keys in keys(s, key): key(s.field, Key(...)) for each field, in the order --help, --print-config
// and docs/configuration.md show them. The field's initialiser is the key's default. Adding a key is its field and
// its key() line.

// Bounds shared by several keys (docs/security.md): wide enough for any real run, small enough
// that no arithmetic on them (epochs x steps per epoch, batch x world x accumulation, seconds in milliseconds)
// overflows and no size asks for more memory than the values can honestly need.
constexpr double kMaxSeed = 4611686018427387904.0;  // 2^62: seed + epoch, seed + rank stay within int64
constexpr double kMaxBatch = 1 << 20;               // samples per rank and micro-batch
constexpr double kMaxSamples = 1e8;                 // synthetic split sizes
constexpr double kMaxEpochs = 1e6;
constexpr double kMaxSteps = 1e12;                     // optimizer-step counts and intervals
constexpr double kMaxSeconds = 7 * 86400.0;            // timeouts: one week
constexpr double kMaxFloat32 = 3.4028234663852886e38;  // the loss scale lives in float32
constexpr size_t kMaxChannels = 4096;                  // image channels
constexpr size_t kMaxListItems = 1024;                 // entries of an integer list (milestones)

// [job]: identity of the run and where its outputs go.
struct JobConfig {
  std::string name = "ddptrain";
  std::string out_dir = "runs/default";
  int64_t seed = 0;
  int64_t threads = 0;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.name, Key("name", "free text, printed in the setup banner").resume_may_differ());
    key(s.out_dir, Key("out_dir", "metrics.jsonl, tensorboard/, checkpoints/ and model.pt go here")
                       .not_empty()
                       .resume_may_differ());
    key(s.seed,
        Key("seed", "model init, shuffling (seed + epoch) and dropout (seed + rank)").at_least(0).at_most(kMaxSeed));
    key(s.threads, Key("threads", "intra-op threads per rank; 0 = OMP_NUM_THREADS or LibTorch's default")
                       .at_least(0)
                       .at_most(1024));
  }
};

// An integer, or "auto": a value the run decides when it starts (data.workers).
struct IntOrAuto {
  bool automatic = false;
  int64_t value = 0;  // when not automatic
};

// A boolean, or "auto": a switch the run decides from its device when it starts (training.cudnn_benchmark).
struct BoolOrAuto {
  bool automatic = false;
  bool value = false;  // when not automatic
};

// [data]: dataset, batching and normalisation.
struct DataConfig {
  DatasetChoice dataset{"fashion-mnist"};
  std::string dir;
  std::string train_shards;
  std::string val_shards;
  int64_t shuffle_buffer = 1000;
  int64_t shards_in_flight = 4;
  int64_t shard_retries = 3;
  std::string class_names;
  int64_t batch_size = 64;
  int64_t eval_batch_size = 1000;
  bool shuffle = true;
  bool drop_last = false;
  int64_t ra_reps = 0;
  double mixup_alpha = 0.0;
  double cutmix_alpha = 0.0;
  IntOrAuto workers{false, 1};
  int64_t prefetch = 4;
  PerChannel mean{-1};
  PerChannel std{-1};
  bool pin_memory = true;
  bool download = false;
  std::vector<std::string> mirrors;
  int64_t synthetic_train_size = 6000;
  int64_t synthetic_test_size = 1000;
  int64_t image_size = 28;
  int64_t resize_size = 0;
  int64_t train_crop_size = 0;
  int64_t val_crop_size = 0;
  int64_t val_resize_size = 0;
  Interpolation interpolation = Interpolation::Bilinear;
  Augment augment = Augment::Standard;
  int64_t max_image_pixels = 89478485;
  OnBadSample on_bad_sample = OnBadSample::Error;
  DecodeChoice decode = DecodeChoice::Cpu;
  AutoAugmentChoice auto_augment = AutoAugmentChoice::None;
  int64_t ra_magnitude = 9;
  int64_t ra_num_ops = 2;
  int64_t augmix_severity = 3;
  PolicyInterpolation auto_augment_interpolation = PolicyInterpolation::Auto;
  double random_erase = 0;
  double jitter_brightness = 0;
  double jitter_contrast = 0;
  double jitter_saturation = 0;
  double jitter_hue = 0;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.dataset, Key("dataset", dataset_name_doc()));
    key(s.dir, Key("dir", "folder of the dataset's files; \"\" = the dataset's default folder"));
    key(s.train_shards, Key("train_shards",
                            "webdataset: the training split's tar shards, brace patterns joined by \"::\" "
                            "(\"/data/train-{000000..001023}.tar\"), each a local file, an http:// or https:// URL or "
                            "pipe:COMMAND, with its index SHARD.ddpidx beside it (ddptrain --index-shards)"));
    key(s.val_shards, Key("val_shards", "webdataset: the evaluation split's tar shards, as train_shards"));
    key(s.shuffle_buffer, Key("shuffle_buffer",
                              "webdataset training: samples in each rank's shuffle buffer (webdataset's "
                              "shuffle(bufsize)), mixing the shards it reads at once; 0 = their samples in turn")
                              .at_least(0)
                              .at_most(int64_t{1} << 22));
    key(s.shards_in_flight,
        Key("shards_in_flight", "webdataset training: the shards each rank reads at once, a sample from each in turn")
            .at_least(1)
            .at_most(1024));
    key(s.shard_retries, Key("shard_retries",
                             "webdataset: retries of a shard read that failed transiently (HTTP: no connection, a "
                             "cut or stalled transfer, 408, 429 or 5xx; pipe: a command that failed), waiting 1, 2, "
                             "4, ... s (at most 30 s) between them; then the run stops naming the shard")
                             .at_least(0)
                             .at_most(20));
    key(s.class_names, Key("class_names",
                           "webdataset: a local text file naming the classes, one per line in label order "
                           "(--make-shards writes OUT_DIR/classes.txt); kept in checkpoints and model.pt as an image "
                           "folder's class names are; \"\" = none"));
    key(s.batch_size, Key("batch_size", "samples per rank and micro-batch").at_least(1).at_most(kMaxBatch));
    key(s.eval_batch_size,
        Key("eval_batch_size", "samples per rank and evaluation batch").at_least(1).at_most(kMaxBatch));
    key(s.shuffle, Key("shuffle", "DistributedSampler's shuffle: randperm seeded job.seed + epoch"));
    key(s.drop_last,
        Key("drop_last", "the sampler truncates to a multiple of the world; a partial last batch is dropped"));
    key(s.ra_reps, Key("ra_reps",
                       "repeated augmentation: torchvision's RASampler (references/classification, --ra-reps) "
                       "instead of DistributedSampler, each sample this many times in a row, differently augmented, "
                       "floor(N // 256 * 256 / world) samples per rank and epoch; 0 or 1 = off")
                       .at_least(0)
                       .at_most(1024));
    key(s.mixup_alpha, Key("mixup_alpha",
                           "torchvision.transforms.v2.MixUp(alpha) on each training batch on the device (train "
                           "accuracy then counts the dominant label of the mixed target); 0 = off")
                           .at_least(0)
                           .at_most(1e6));
    key(s.cutmix_alpha, Key("cutmix_alpha",
                            "torchvision.transforms.v2.CutMix(alpha) on each training batch on the device; with "
                            "mixup_alpha, one of the two per batch, each with probability 0.5; 0 = off")
                            .at_least(0)
                            .at_most(1e6));
    key(s.workers, Key("workers",
                       "threads per rank that read and assemble samples (0 = on the training thread; auto = the "
                       "CPUs left to the rank: available CPUs / ranks on the host - its training threads)")
                       .at_least(0)
                       .at_most(64)
                       .resume_may_differ());
    key(s.prefetch, Key("prefetch", "batches under assembly or ready ahead of the training step, per rank")
                        .at_least(1)
                        .at_most(1024)
                        .resume_may_differ());
    key(s.mean, Key("mean", "normalisation mean, one for all channels or a list, one per channel; -1 = the dataset's")
                    .at_least(0)
                    .at_most(1)
                    .or_dataset_default());
    key(s.std, Key("std", "normalisation standard deviation, one or one per channel; -1 = the dataset's")
                   .above(0)
                   .at_most(1000)
                   .or_dataset_default());
    key(s.pin_memory, Key("pin_memory", "CUDA: batches assembled in pinned host memory, copied non_blocking"));
    key(s.download, Key("download", "mnist: fetch missing files from data.mirrors, checked against torchvision's MD5"));
    key(s.mirrors, Key("mirrors", "URL prefixes tried in order; [] = torchvision's mirror list"));
    key(s.synthetic_train_size,
        Key("synthetic_train_size", "synthetic: training samples").at_least(1).at_most(kMaxSamples));
    key(s.synthetic_test_size, Key("synthetic_test_size", "synthetic: test samples").at_least(1).at_most(kMaxSamples));
    key(s.image_size, Key("image_size",
                          "synthetic: image height and width; image_folder: the side of the crop the model sees "
                          "(default 224; also webdataset); MNIST is 28, CIFAR-10 32")
                          .at_least(16)
                          .at_most(4096));
    key(s.resize_size,
        Key("resize_size",
            "image_folder, webdataset: evaluation's Resize (shorter side) before CenterCrop(image_size); 0 = "
            "image_size * 256 / 224")
            .at_least(0)
            .at_most(16384));
    key(s.train_crop_size, Key("train_crop_size",
                               "image_folder, webdataset: the side of training's RandomResizedCrop (torchvision's "
                               "--train-crop-size; FixRes trains smaller than it evaluates); 0 = image_size")
                               .at_least(0)
                               .at_most(4096));
    key(s.val_crop_size,
        Key("val_crop_size", "image_folder, webdataset: evaluation's CenterCrop (--val-crop-size); 0 = image_size")
            .at_least(0)
            .at_most(4096));
    key(s.val_resize_size,
        Key("val_resize_size",
            "image_folder, webdataset: evaluation's Resize of the shorter side (--val-resize-size); 0 = "
            "resize_size")
            .at_least(0)
            .at_most(16384));
    key(s.interpolation,
        Key("interpolation",
            "image_folder, webdataset: the antialiased resize of the training crop and the evaluation image "
            "(--interpolation)"));
    key(s.augment,
        Key("augment",
            "image_folder, webdataset training: RandomResizedCrop(image_size) + RandomHorizontalFlip, or none (the "
            "evaluation transform)"));
    key(s.max_image_pixels,
        Key("max_image_pixels",
            "image_folder, webdataset: an image whose header announces more pixels is refused (PIL's limit)")
            .at_least(1)
            .at_most(1e12)
            .resume_may_differ());
    key(s.on_bad_sample, Key("on_bad_sample",
                             "image_folder, webdataset: an image that cannot be decoded (a shard sample: or its class) "
                             "stops the run (error, naming file and "
                             "rank), or the next readable sample of the split takes its place (skip, counted)")
                             .resume_may_differ());
    key(s.decode,
        Key("decode",
            "image_folder, webdataset: where JPEGs are decoded and transformed: cpu (loader threads), gpu (nvJPEG on "
            "the training GPU; PNG, CMYK, 12-bit, arithmetic and lossless JPEGs still on the CPU), auto = "
            "gpu on a CUDA device"));
    key(s.auto_augment,
        Key("auto_augment",
            "image_folder, webdataset training (data.augment = \"standard\"): an automatic augmentation policy applied "
            "to the crop "
            "after the flip, torchvision's v2.TrivialAugmentWide (ta_wide), v2.RandAugment (rand_augment), "
            "v2.AutoAugment's ImageNet policy (imagenet) or v2.AugMix (augmix); with data.decode = \"gpu\" such "
            "samples are decoded on the loader threads")
            .of_training_transform());
    key(s.ra_magnitude, Key("ra_magnitude", "auto_augment = \"rand_augment\": the magnitude bin of every op (of 31)")
                            .at_least(0)
                            .at_most(30)
                            .of_training_transform());
    key(s.ra_num_ops, Key("ra_num_ops", "auto_augment = \"rand_augment\": ops applied in a row")
                          .at_least(0)
                          .at_most(16)
                          .of_training_transform());
    key(s.augmix_severity,
        Key("augmix_severity", "auto_augment = \"augmix\": the severity of its ops (magnitude bins drawn below it)")
            .at_least(1)
            .at_most(10)
            .of_training_transform());
    key(s.auto_augment_interpolation,
        Key("auto_augment_interpolation",
            "auto_augment's rotate, shear and translate ops: auto = the policy class's default (NEAREST; AugMix "
            "BILINEAR), or nearest/bilinear (torchvision's reference presets pass --interpolation to the policy)")
            .of_training_transform());
    key(s.random_erase, Key("random_erase",
                            "image_folder, webdataset training (data.augment = \"standard\"): the probability of "
                            "v2.RandomErasing(scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0) on the normalised "
                            "image; 0 = off")
                            .at_least(0)
                            .at_most(1)
                            .of_training_transform());
    // v2.ColorJitter(brightness, contrast, saturation, hue) after the policy: a key at 0 leaves its op out, all four
    // at 0 the transform.
#define DDP_JITTER_DOC "image_folder, webdataset training (data.augment = \"standard\"): v2.ColorJitter's "
    key(s.jitter_brightness,
        Key("jitter_brightness", DDP_JITTER_DOC "brightness, a factor drawn from [max(0, 1 - v), 1 + v]; 0 = off")
            .at_least(0)
            .at_most(100)
            .of_training_transform());
    key(s.jitter_contrast,
        Key("jitter_contrast", DDP_JITTER_DOC "contrast, a factor drawn from [max(0, 1 - v), 1 + v]; 0 = off")
            .at_least(0)
            .at_most(100)
            .of_training_transform());
    key(s.jitter_saturation,
        Key("jitter_saturation", DDP_JITTER_DOC "saturation, a factor drawn from [max(0, 1 - v), 1 + v]; 0 = off")
            .at_least(0)
            .at_most(100)
            .of_training_transform());
    key(s.jitter_hue, Key("jitter_hue", DDP_JITTER_DOC "hue, a shift drawn from [-v, v] of a full turn; 0 = off")
                          .at_least(0)
                          .at_most(0.5)
                          .of_training_transform());
#undef DDP_JITTER_DOC
  }
};

// [model]: architecture and optional starting weights.
struct ModelConfig {
  ModelChoice name{"net"};
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  double dropout = -1;           // -1: the model row's default
  double stochastic_depth = -1;  // -1: the model row's default
  std::string init_from;
  bool reset_head = false;
  std::string path;
  std::string library;
  MemoryFormat memory_format = MemoryFormat::Auto;
  bool skip_padding_taps = true;
  bool sync_batchnorm = false;
  // Not a key: the side of the images the model is built for (data.train_crop_size, else data.image_size), which
  // Trainer::model_config fills from [data]; a ViT's position embedding has one entry per patch of it (torchvision's
  // VisionTransformer image_size, 224 by default), a plugin reads it from its ModelOptions.
  int64_t image_size = 224;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.name, Key("name", model_name_doc()));
    key(s.path, Key("path", "torchscript: the file torch.jit.save wrote (scripted or traced)"));
    key(s.library, Key("library", "plugin: the shared library built against ddptrain/plugin_api.h (docs/plugins.md)"));
    key(s.in_channels, Key("in_channels", "image channels the first convolution takes; unset: the dataset's")
                           .at_least(1)
                           .at_most(kMaxChannels));
    key(s.num_classes, Key("num_classes", "outputs of the classifier; image_folder, unset: its class folders")
                           .at_least(2)
                           .at_most(1e6));
    key(s.dropout, Key("dropout",
                       "probability of the model's dropouts (net: both; torchvision's CNNs: the classifier's; "
                       "vit_b_16: throughout its encoder, as torchvision's dropout argument)")
                       .at_least(0)
                       .at_most(1)
                       .or_unset(-1, "unset: the model's default (net 0.5, torchvision's for its models)"));
    key(s.stochastic_depth,
        Key("stochastic_depth", "probability that a residual block is dropped (torchvision.ops.StochasticDepth)")
            .at_least(0)
            .below(1)
            .or_unset(-1, "unset: torchvision's default for the architecture"));
    key(s.init_from, Key("init_from", "starting weights: a state dict saved by torch.save, or model.pt"));
    key(s.reset_head, Key("reset_head",
                          "init_from: every weight but the classifier head's (fc); the head keeps its fresh init "
                          "(fine-tuning to another num_classes)"));
    key(s.memory_format,
        Key("memory_format",
            "layout convolutions run in; auto = channels_last on CUDA, and for net in float32 on the CPU"));
    key(s.skip_padding_taps,
        Key("skip_padding_taps", "convolutions leave out kernel taps that only read zero padding (same sums)"));
    key(s.sync_batchnorm, Key("sync_batchnorm", sync_batchnorm_doc()));
  }
};

// model.dropout and model.stochastic_depth where they are unset (-1): model.name's row's defaults (torchvision's for
// its architectures); what config loading and make_model resolve.
void resolve_model_defaults(ModelConfig& m);

// [optimizer]: the update rule, one of the optimizer rows of optim/ (config/optimizer_rows.h), and how it runs.
struct OptimizerConfig {
  OptimizerChoice name{"sgd"};
  double lr = 0.01;
  Hyperparameters hyper;  // every optimizer's own keys (momentum, betas, eps, ...): declared in its row in optim/
  Foreach foreach = Foreach::Auto;
  bool fused = false;
  LrScaling scale_lr = LrScaling::None;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.name, Key("name", optimizer_name_doc()));
    key(s.lr, Key("lr", "learning rate before optimizer.scale_lr and the schedule").above(0).at_most(100));
    for (const HyperparameterKey& h : hyperparameter_keys()) {
      if (h.flag)
        key(s.hyper.flag_field(h), h.key);
      else
        key(s.hyper.number_field(h), h.key);
    }
    key(s.foreach, Key("foreach",
                       "torch.optim's foreach: multi-tensor kernels (on), the per-parameter loop (off), or auto: "
                       "multi-tensor where every parameter is on CUDA")
                       .resume_may_differ());
    key(s.fused, Key("fused",
                     "torch.optim's fused=True: one fused kernel per device and dtype for the whole update (CPU and "
                     "CUDA; not with foreach = \"on\")")
                     .resume_may_differ());
    key(s.scale_lr, Key("scale_lr", "linear: lr x world size"));
  }
};

// [lr_scheduler]: the learning rate per optimizer step: linear warmup, then decay.
struct LrSchedulerConfig {
  int64_t warmup_steps = 0;
  WarmupMethod warmup_method = WarmupMethod::Linear;
  double warmup_start_factor = 0.0;
  LrDecay decay = LrDecay::None;
  double min_lr = 0.0;
  int64_t step_size = 1000;
  std::vector<int64_t> milestones;
  double gamma = 0.1;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.warmup_steps,
        Key("warmup_steps", "optimizer steps of warmup before the decay").at_least(0).at_most(kMaxSteps));
    key(s.warmup_method, Key("warmup_method",
                             "linear: from lr x warmup_start_factor up to lr (LinearLR); constant: lr x "
                             "warmup_start_factor throughout (ConstantLR)"));
    key(s.warmup_start_factor,
        Key("warmup_start_factor",
            "LinearLR's start_factor or ConstantLR's factor (torchvision's --lr-warmup-decay; its reference scripts "
            "use 0.01): step k of the warmup has lr x (f + (1 - f) k / warmup_steps); 0 = linear from lr / "
            "warmup_steps to lr on the last warmup step, lr x (k + 1) / warmup_steps")
            .at_least(0)
            .at_most(1));
    key(s.decay, Key("decay",
                     "after warmup: constant, cosine to min_lr, x gamma every step_size steps, or x gamma at each "
                     "of the milestones"));
    key(s.min_lr, Key("min_lr", "cosine: the floor").at_least(0).at_most(100));
    key(s.step_size, Key("step_size", "step: steps between decays").at_least(1).at_most(kMaxSteps));
    key(s.milestones, Key("milestones",
                          "multistep: the steps after warmup at which lr is multiplied by gamma (MultiStepLR's "
                          "milestones; one listed twice decays twice)")
                          .at_least(1)
                          .at_most(kMaxSteps));
    key(s.gamma, Key("gamma", "step, multistep: factor per decay").above(0).at_most(1));
  }
};

// [training]: loop lengths and per-step options.
struct TrainingConfig {
  int64_t epochs = 1;
  int64_t max_steps = 0;
  int64_t grad_accum_steps = 1;
  double clip_grad_norm = 0.0;
  double label_smoothing = 0.0;
  double ema_decay = 0.0;
  int64_t ema_every_steps = 1;
  bool ema_adjust = false;
  OnNonFinite on_nonfinite = OnNonFinite::Stop;
  int64_t max_nonfinite_skips = 10;
  int64_t eval_every_epochs = 1;
  bool deterministic = false;
  BoolOrAuto cudnn_benchmark{true, false};
  bool cudnn_allow_tf32 = true;
  bool cuda_graph = false;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.epochs, Key("epochs",
                      "passes over the training split; 0 = as many as training.max_steps takes (the default when "
                      "max_steps is set: PyTorch Lightning's rule)")
                      .at_least(0)
                      .at_most(kMaxEpochs)
                      .resume_may_differ());
    key(s.max_steps,
        Key("max_steps", "stop after this many optimizer steps; 0 = no limit (training.epochs ends the run)")
            .at_least(0)
            .at_most(kMaxSteps)
            .resume_may_differ());
    key(s.grad_accum_steps, Key("grad_accum_steps", "micro-batches per optimizer step (gradients synced on the last)")
                                .at_least(1)
                                .at_most(1 << 20));
    key(s.clip_grad_norm,
        Key("clip_grad_norm", "clip the global gradient norm to this; 0 = off").at_least(0).at_most(1e6));
    key(s.label_smoothing, Key("label_smoothing",
                               "CrossEntropyLoss(label_smoothing=): training targets mixed with "
                               "the uniform distribution; 0 = off")
                               .at_least(0)
                               .at_most(1));
    key(s.ema_decay, Key("ema_decay",
                         "torch.optim.swa_utils.AveragedModel's EMA of weights and buffers after each step, evaluated "
                         "beside them (accuracy_ema) and saved as model_ema.pt; 0 = off")
                         .at_least(0)
                         .below(1));
    key(s.ema_every_steps, Key("ema_every_steps",
                               "the EMA is updated after every Nth optimizer step of an epoch, the first included "
                               "(torchvision's reference train.py: --model-ema-steps)")
                               .at_least(1)
                               .at_most(kMaxSteps));
    key(s.ema_adjust, Key("ema_adjust",
                          "torchvision's reference train.py: the EMA decays by 1 - min(1, (1 - ema_decay) x world size "
                          "x data.batch_size x training.grad_accum_steps x ema_every_steps / epochs), and during "
                          "lr_scheduler's warmup each update copies the weights"));
    key(s.on_nonfinite, Key("on_nonfinite",
                            "a step whose gradients are not finite (no loss scaler to handle it): stop every rank, "
                            "or skip it on every rank (no optimizer step, counted)")
                            .resume_may_differ());
    key(s.max_nonfinite_skips,
        Key("max_nonfinite_skips", "skip: stop at the next non-finite step after this many in a row")
            .at_least(1)
            .at_most(1e9)
            .resume_may_differ());
    key(s.eval_every_epochs,
        Key("eval_every_epochs", "evaluate every N epochs; 0 = only at the end").at_least(0).at_most(kMaxEpochs));
    key(s.deterministic, Key("deterministic", "torch.use_deterministic_algorithms + cudnn.deterministic (CUDA)"));
    key(s.cudnn_benchmark, Key("cudnn_benchmark",
                               "torch.backends.cudnn.benchmark: convolution algorithms picked by timing them (CUDA; "
                               "not with deterministic); auto = on for CUDA unless deterministic")
                               .resume_may_differ());
    key(s.cudnn_allow_tf32,
        Key("cudnn_allow_tf32", "torch.backends.cudnn.allow_tf32: float32 convolutions may use TF32 (CUDA, Ampere+)"));
    key(s.cuda_graph, Key("cuda_graph",
                          "after warm-up steps, capture the whole training step as one CUDA graph (torch.cuda.graph) "
                          "and replay it for every full batch (CUDA; sgd with optimizer.fused)")
                          .resume_may_differ());
  }
};

// [amp]: autocast and loss scaling (torch.autocast, torch.amp.GradScaler).
struct AmpConfig {
  bool enabled = false;
  AmpDtype dtype = AmpDtype::Auto;
  LossScaling loss_scaling = LossScaling::Auto;
  double init_scale = 65536.0;  // 2**16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.enabled, Key("enabled", "forward passes under autocast"));
    key(s.dtype, Key("dtype", "autocast dtype; auto = float16 on CUDA, bfloat16 on CPU (fp16, bf16 are aliases)"));
    key(s.loss_scaling, Key("loss_scaling", "dynamic loss scaling; auto = on for float16, off for bfloat16"));
    key(s.init_scale, Key("init_scale", "GradScaler's first scale").above(0).at_most(kMaxFloat32));
    key(s.growth_factor, Key("growth_factor", "scale x this after growth_interval clean steps").above(1).at_most(1000));
    key(s.backoff_factor, Key("backoff_factor", "scale x this after a step with inf/NaN gradients").above(0).below(1));
    key(s.growth_interval, Key("growth_interval", "clean steps before the scale grows").at_least(1).at_most(kMaxSteps));
  }
};

// [dist]: process group and DDP behaviour.
struct DistConfig {
  DeviceChoice device = DeviceChoice::Auto;
  BackendChoice backend = BackendChoice::Auto;
  double timeout_s = 300.0;
  double bucket_cap_mb = 25.0;
  bool broadcast_buffers = true;
  GradCompression grad_compression = GradCompression::None;
  // PowerSGDState's defaults (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook).
  int64_t powersgd_rank = 1;
  int64_t powersgd_start_step = 1000;
  double powersgd_min_compression_rate = 2;
  bool powersgd_error_feedback = true;
  bool powersgd_warm_start = true;
  double powersgd_epsilon = 0;
  int64_t powersgd_seed = 0;
  PowerSgdProducts powersgd_products = PowerSgdProducts::Hook;
  bool skip_zero_gradients = false;
  bool find_unused_parameters = false;
  bool static_graph = false;
  // PyTorch's default is false; ddptrain's training loop never replaces a gradient tensor, so true is safe here.
  bool gradient_as_bucket_view = true;
  AllreducePath allreduce = AllreducePath::Auto;
  int64_t check_replicas_every = 0;
  double hang_report_s = 0;  // 0: timeout_s / 2

  // How long a rank waits for its peers before every rank is asked what it is doing.
  double hang_report_after_s() const { return hang_report_s > 0 ? hang_report_s : timeout_s / 2; }

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.device, Key("device", "auto = cuda:LOCAL_RANK when a GPU is visible, else cpu"));
    key(s.backend, Key("backend", "auto = nccl on CUDA, gloo on CPU"));
    key(s.timeout_s, Key("timeout_s", "how long a rank waits for the others (rendezvous, collectives)")
                         .at_least(0.001)
                         .at_most(kMaxSeconds));
    key(s.bucket_cap_mb, Key("bucket_cap_mb", "DDP gradient bucket size").above(0).at_most(65536));
    key(s.broadcast_buffers,
        Key("broadcast_buffers", "broadcast buffers (BatchNorm statistics) from rank 0 before each synced forward"));
    key(s.grad_compression,
        Key("grad_compression",
            "fp16 or bf16: DDP's fp16_compress_hook or bf16_compress_hook (each bucket cast, divided by the world "
            "size, all-reduced, cast back); powersgd: DDP's powerSGD_hook (rank-r factors of each gradient matrix, "
            "dist.powersgd_*)"));
    key(s.powersgd_rank, Key("powersgd_rank", "PowerSGD's matrix_approximation_rank").at_least(1).at_most(1024));
    key(s.powersgd_start_step,
        Key("powersgd_start_step",
            "PowerSGD's start_powerSGD_iter: synchronising backwards all-reduced whole before compression starts")
            .at_least(0)
            .at_most(kMaxSteps));
    key(s.powersgd_min_compression_rate,
        Key("powersgd_min_compression_rate",
            "PowerSGD compresses a matrix only when (rows + columns) x rank x this < rows x columns")
            .at_least(0)
            .at_most(1e9));
    key(s.powersgd_error_feedback,
        Key("powersgd_error_feedback", "PowerSGD's use_error_feedback: the compression error joins the next step"));
    key(s.powersgd_warm_start,
        Key("powersgd_warm_start", "PowerSGD's warm_start: each step's Q starts from the last step's"));
    key(s.powersgd_epsilon,
        Key("powersgd_epsilon", "PowerSGD's orthogonalization_epsilon (added to each column's norm)")
            .at_least(0)
            .at_most(1));
    key(s.powersgd_seed, Key("powersgd_seed", "PowerSGD's random_seed (numpy RandomState) for the random Q matrices")
                             .at_least(0)
                             .at_most(4294967295.0));
    key(s.powersgd_products,
        Key("powersgd_products",
            "hook: P = M Q, Q = M^T P and P Q^T by torch.bmm, as powerSGD_hook (its weights bit for bit); "
            "transposed: on the CPU the products each computed as its transpose, Q^T M^T and P^T M (several times "
            "faster through MKL's sgemm), at ranks up to 4 P = M Q in one pass with error feedback's sum, and P Q^T "
            "in one pass with the residual (the same sums in another order, so float32 rounding differs)"));
    key(s.skip_zero_gradients,
        Key("skip_zero_gradients",
            "all-reduce only the gradient elements not zero on every rank (same result; pays where the link bounds "
            "the sync; CPU)"));
    key(s.find_unused_parameters, Key("find_unused_parameters", "DDP's search for parameters the forward did not use"));
    key(s.static_graph, Key("static_graph",
                            "DDP's static_graph: every step uses the same parameters; the unused ones are found once, "
                            "in the first step, instead of by a search every step")
                            .resume_may_differ());
    key(s.gradient_as_bucket_view,
        Key("gradient_as_bucket_view", "gradients are views into DDP's buckets (one copy less)"));
    key(s.allreduce, Key("allreduce",
                         "gloo backend: auto = shared memory when every rank is on one host, else "
                         "hierarchical (shared memory in each node, Gloo between nodes)"));
    key(s.check_replicas_every,
        Key("check_replicas_every", "every N steps check that all ranks hold identical parameters; 0 = off")
            .at_least(0)
            .at_most(kMaxSteps));
    key(s.hang_report_s, Key("hang_report_s",
                             "a rank waiting this long for its peers makes every rank say where it is (phase, step, "
                             "collectives); 0 = dist.timeout_s / 2")
                             .at_least(0)
                             .at_most(kMaxSeconds)
                             .resume_may_differ());
  }
};

// checkpoint.resume: the newest complete checkpoint (auto), none (never), or the file at `path`.
struct ResumeFrom {
  ResumeMode mode = ResumeMode::Auto;
  std::string path;  // ResumeMode::Path only
};

// [checkpoint]: periodic training state. Where and how often a run saves never changes its weights.
struct CheckpointConfig {
  int64_t every_steps = 0;
  int64_t every_epochs = 0;
  int64_t keep_last = 3;
  int64_t keep_best = 0;
  std::string dir;
  OnCheckpointError on_error = OnCheckpointError::Fail;
  CheckpointReplicas replicas = CheckpointReplicas::Auto;
  bool async = true;
  ResumeFrom resume;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.every_steps,
        Key("every_steps", "save every N optimizer steps; 0 = off").at_least(0).at_most(kMaxSteps).resume_may_differ());
    key(s.every_epochs,
        Key("every_epochs", "save every N epochs; 0 = off").at_least(0).at_most(kMaxEpochs).resume_may_differ());
    key(s.keep_last, Key("keep_last", "newest complete checkpoints kept").at_least(1).at_most(1e6).resume_may_differ());
    key(s.keep_best,
        Key("keep_best", "also keep the N best by eval accuracy").at_least(0).at_most(1e6).resume_may_differ());
    key(s.dir, Key("dir", "\"\" = job.out_dir/checkpoints").resume_may_differ());
    key(s.on_error, Key("on_error", "what a failed checkpoint write does to the run").resume_may_differ());
    key(s.replicas, Key("replicas",
                        "node: each node's LOCAL_RANK 0 writes a copy into its checkpoint.dir | rank0: rank 0 alone | "
                        "auto: node when the job spans nodes (LOCAL_WORLD_SIZE < WORLD_SIZE)")
                        .resume_may_differ());
    key(s.async, Key("async",
                     "write (and fsync, prune) in the background while training goes on; the state is copied at the "
                     "step, one save in flight at a time")
                     .resume_may_differ());
    key(s.resume,
        Key("resume", "auto: the newest valid checkpoint of the run's line | never | a path").resume_may_differ());
  }
};

// [metrics]: what rank 0 reports.
struct MetricsConfig {
  int64_t log_every_steps = 50;
  ProgressMode progress = ProgressMode::Auto;
  bool tensorboard = false;
  bool sample_ids = false;
  std::string listen;
  double stall_s = 600;
  std::string mlflow_uri;
  std::string mlflow_experiment;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.log_every_steps, Key("log_every_steps", "a metrics.jsonl record every N optimizer steps")
                               .at_least(1)
                               .at_most(kMaxSteps)
                               .resume_may_differ());
    key(s.progress, Key("progress", "auto = a live bar on a terminal, plain lines otherwise").resume_may_differ());
    key(s.tensorboard,
        Key("tensorboard", "also write TensorBoard event files to job.out_dir/tensorboard").resume_may_differ());
    key(s.sample_ids, Key("sample_ids",
                          "every rank writes the dataset indices of each step's samples to "
                          "job.out_dir/samples/rank-R.jsonl (appended on resume)")
                          .resume_may_differ());
    key(s.listen, Key("listen",
                      "HOST:PORT where rank 0 serves /metrics (Prometheus' text format) and /healthz, read-only; "
                      "\"\" = off; port 0 = a free one")
                      .resume_may_differ());
    key(s.stall_s, Key("stall_s", "metrics.listen: /healthz answers 503 once no optimizer step ended for this long")
                       .above(0)
                       .at_most(1e9)
                       .resume_may_differ());
    key(s.mlflow_uri, Key("mlflow_uri",
                          "an MLflow tracking server (http:// or https://) where rank 0 logs the run: params, metrics, "
                          "artifacts (docs/monitoring.md); \"\" = off")
                          .resume_may_differ());
    key(s.mlflow_experiment,
        Key("mlflow_experiment",
            "metrics.mlflow_uri: the experiment the run goes into (made if absent); \"\" = job.name")
            .resume_may_differ());
  }
};

// [profile]: a trace of a few training steps by LibTorch's profiler (torch.profiler's Kineto traces).
struct ProfileConfig {
  int64_t start_step = 5;
  int64_t steps = 0;
  bool memory_snapshot = false;

  template <class S, class K>
  static void keys(S& s, K&& key) {
    key(s.start_step, Key("start_step", "the first optimizer step traced (1-based; its data loading included)")
                          .at_least(1)
                          .at_most(kMaxSteps)
                          .resume_may_differ());
    key(s.steps,
        Key("steps", "optimizer steps traced into job.out_dir/profile/rank<R>.json (Chrome/Perfetto trace); 0 = off")
            .at_least(0)
            .at_most(1000)
            .resume_may_differ());
    key(s.memory_snapshot, Key("memory_snapshot",
                               "on CUDA, also the caching allocator's history over the traced steps, into "
                               "job.out_dir/profile/memory_rank<R>.pickle (open it at pytorch.org/memory_viz)")
                               .resume_may_differ());
  }
};

// The sections in file order (a new section is also named in config/key_walk.h's for_each_section).
struct Config {
  JobConfig job;
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  LrSchedulerConfig lr_scheduler;
  TrainingConfig training;
  AmpConfig amp;
  DistConfig dist;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  ProfileConfig profile;
  std::string source;  // path of the TOML file it came from ("" for defaults)
};

// Keys an earlier ddptrain read and this one ignores, so that its config files and the config a checkpoint holds
// still load: "section.key" and why it is gone (docs/configuration.md).
struct RetiredKey {
  const char* path;
  const char* reason;
};
inline constexpr RetiredKey kRetiredKeys[] = {
    {"job.step_memory",
     "the planned step allocator after 0.3.0 is gone (it gained 3% samples/s and 5% peak RSS on "
     "ResNet-18, bench/RESULTS.md); LibTorch's CPU allocator serves every step"},
};

// A config or usage problem: the message starts with its location (FILE:LINE:COL or the override). It is one line:
// a line break that a quoted value or key brings in is shown as \n (or \r), so the error stays one `error:` line.
struct ConfigError : std::runtime_error {
  explicit ConfigError(const std::string& message) : std::runtime_error(one_line_text(message)) {}

 private:
  static std::string one_line_text(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '\n' ? std::string("\\n") : c == '\r' ? std::string("\\r") : std::string(1, c);
    return out;
  }
};

// Reads a TOML file strictly; overrides are "section.key=value" strings (without the leading --).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The text of a config file: a regular file of at most kMaxConfigBytes, else a ConfigError naming the path (a
// device, FIFO or endless file is refused without reading more than the limit).
constexpr size_t kMaxConfigBytes = size_t{1} << 20;
std::string read_config_file(const std::string& path);
Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});

// Every key with its resolved value, as TOML that load_config reads back (--print-config, checkpoints).
std::string format_config(const Config& cfg);
// The keys a resumed run must keep (those not marked resume_may_differ), as TOML: two configs that print the same
// here train the same steps the same way.
std::string format_resume_config(const Config& cfg);
// SHA-256 of text, as 64 hex digits: config digests (rank views, checkpoints) hash what format_*config prints.
std::string config_digest(const std::string& config_text);

// What a key's value is, as --help names it.
enum class KeyKind { Bool, Int, Float, Floats, Ints, String, Choice, List, IntOrAuto, BoolOrAuto };
// One key as the reference shows it.
struct KeyInfo {
  std::string section, name;  // "data", "batch_size"
  KeyKind kind;
  std::string value;    // TOML, as --print-config writes it
  std::string allowed;  // as --help states it: "range: >= 1 and <= 64", "one of: auto | bar | plain | off", or ""
  std::vector<std::string> choices;  // Choice: every accepted name, aliases included
  double min, max;                   // Int, Float, Floats, Ints: the bounds (infinite when none)
  std::string doc;
  bool resume_may_differ;
};
// Every key of cfg with its current value, in declaration order.
std::vector<KeyInfo> describe_keys(const Config& cfg);
// bool, int, float, floats, ints, string, choice, list, int/auto, bool/auto
const char* kind_label(KeyKind kind);
// The kind of the key an override names ("section.key"); a ConfigError prefixed `loc`, with the closest key as a
// did-you-mean, when there is no such key. A retired key takes a value as a string key does.
KeyKind override_kind(const std::string& path, const std::string& loc);

// --help's key reference and the key table of docs/configuration.md, from the declarations: type, default, range or
// choices, doc.
std::string config_help();
std::string config_markdown();

// "a, b, c" for error messages.
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");
// The candidate closest to name (edit distance), or "" when none is close enough to suggest.
std::string closest_match(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace ddp
