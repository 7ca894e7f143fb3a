// Run configuration: one documented struct per TOML section, plus loading, overriding and printing.
#pragma once

#include "config/choices.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp {

// [job]: identity of the run and where its outputs go.
struct JobConfig {
  std::string name = "ddptrain";       // free text, printed in the setup banner
  std::string out_dir = "runs/default";  // metrics.jsonl, tensorboard/, checkpoints/, model.pt
  int64_t seed = 0;                     // model init, shuffling (seed + epoch) and dropout
  int64_t threads = 0;                  // intra-op threads per rank; 0 = OMP_NUM_THREADS or torch default
  // malloc: LibTorch's allocator | planned: steps 4+ reuse one block (memory/)
  StepMemory step_memory = StepMemory::Malloc;
};

// [data]: dataset, batching and normalisation.
struct DataConfig {
  DatasetName dataset = DatasetName::FashionMnist;  // mnist | fashion-mnist | synthetic
  std::string dir;                        // IDX files; "" = the dataset's default folder
  int64_t batch_size = 64;                // per rank, per micro-step
  int64_t eval_batch_size = 1000;         // per rank
  bool shuffle = true;                    // DistributedSampler shuffle (randperm seeded job.seed + epoch)
  bool drop_last = false;                 // sampler truncates to a multiple of world size; loader drops a partial batch
  int64_t workers = 1;                    // background batch-assembly threads (0 = on the training thread)
  int64_t prefetch = 4;                   // batches assembled ahead per rank
  double mean = -1;                       // normalisation; -1 = dataset default, else 0..1
  double std = -1;                        // normalisation; -1 = dataset default, else > 0 (0 is refused)
  bool pin_memory = true;                 // CUDA only: batches assembled in pinned host memory, copied non_blocking
  bool download = false;                  // mnist only: fetch missing files from data.mirrors
  std::vector<std::string> mirrors;       // URL prefixes; empty = torchvision's mirror list
  int64_t synthetic_train_size = 6000;    // synthetic only
  int64_t synthetic_test_size = 1000;     // synthetic only
  int64_t image_size = 28;                // synthetic only (mnist formats are 28)
};

// [model]: architecture and optional starting weights.
struct ModelConfig {
  ModelName name = ModelName::Net;  // net | resnet18 | resnet34 | resnet50 | resnet101 | resnet152
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  double dropout = 0.5;      // net only; 0 disables both dropouts
  std::string init_from;     // state dict saved by torch.save / model.pt
  // Layout of convolution activations and weights while they run (parameters stay contiguous):
  // auto | contiguous | channels_last. auto: channels_last for net, contiguous for resnet* (bench/RESULTS.md).
  MemoryFormat memory_format = MemoryFormat::Auto;
  // Convolutions leave out kernel taps that only read zero padding (3x3 over a 1x1 map = 1x1): same sums, less work.
  bool skip_padding_taps = true;
};

// [optimizer]: update rule (PyTorch's SGD / AdamW).
struct OptimizerConfig {
  OptimizerName name = OptimizerName::Sgd;  // sgd | adamw
  double lr = 0.01;
  double momentum = 0.0;     // sgd
  double weight_decay = 0.0;
  bool nesterov = false;     // sgd
  double beta1 = 0.9;        // adamw
  double beta2 = 0.999;      // adamw
  double eps = 1e-8;         // adamw
  LrScaling scale_lr = LrScaling::None;  // none | linear (lr x world size)
};

// [lr_scheduler]: per optimizer step: linear warmup, then decay.
struct LrSchedulerConfig {
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::None;  // none | cosine | step
  double min_lr = 0.0;         // cosine floor
  int64_t step_size = 1000;    // step decay: multiply by gamma every step_size steps after warmup
  double gamma = 0.1;
};

// [training]: loop lengths and per-step options.
struct TrainingConfig {
  int64_t epochs = 1;
  int64_t max_steps = 0;         // optimizer steps; 0 = no limit
  int64_t grad_accum_steps = 1;  // micro-batches per optimizer step
  double clip_grad_norm = 0.0;   // 0 = off
  int64_t eval_every_epochs = 1; // 0 = only at the end
  // torch.use_deterministic_algorithms(True) + cudnn.deterministic + CUBLAS_WORKSPACE_CONFIG=:4096:8 (when unset).
  bool deterministic = false;
  bool cudnn_benchmark = false;  // torch.backends.cudnn.benchmark (CUDA; not with deterministic)
};

// [amp]: autocast and loss scaling.
struct AmpConfig {
  bool enabled = false;
  // auto (float16 on CUDA, bfloat16 on CPU) | float16 | bfloat16; "fp16" / "bf16" are accepted as the same names.
  AmpDtype dtype = AmpDtype::Auto;
  LossScaling loss_scaling = LossScaling::Auto;  // auto | dynamic | off
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// [dist]: process group and DDP behaviour.
struct DistConfig {
  DeviceChoice device = DeviceChoice::Auto;  // auto (cuda:LOCAL_RANK when a GPU is visible, else cpu) | cpu | cuda
  BackendChoice backend = BackendChoice::Auto;  // auto (nccl on CUDA, gloo on CPU) | gloo | nccl
  double timeout_s = 300.0;
  double bucket_cap_mb = 25.0;
  bool broadcast_buffers = true;
  GradCompression grad_compression = GradCompression::None;  // none | fp16
  bool find_unused_parameters = false;
  // Gradients live in DDP's communication buckets (one copy of the gradients less, same values). PyTorch's
  // default is false; ddptrain's training loop never replaces a gradient tensor, so true is safe here.
  bool gradient_as_bucket_view = true;
  // Where Gloo all-reduces run: "auto" = through shared memory when every rank is on this host (checked when the
  // job starts), else over Gloo; "shm" = shared memory or fail; "gloo" = always Gloo's TCP. Not used with nccl.
  AllreducePath allreduce = AllreducePath::Auto;  // auto | shm | gloo
  int64_t check_replicas_every = 0;  // every N optimizer steps, check all ranks hold bit-identical parameters (0 = off)
};

// checkpoint.resume: the newest complete checkpoint (auto), none (never), or the file at `path`.
struct ResumeFrom {
  ResumeMode mode = ResumeMode::Auto;
  std::string path;  // ResumeMode::Path only
};

// [checkpoint]: periodic training state.
struct CheckpointConfig {
  int64_t every_steps = 0;   // 0 = off
  int64_t every_epochs = 0;  // 0 = off
  int64_t keep_last = 3;
  int64_t keep_best = 0;     // also keep the N best by eval accuracy
  std::string dir;           // "" = job.out_dir/checkpoints
  OnCheckpointError on_error = OnCheckpointError::Fail;  // fail | warn: what a failed checkpoint write does to the run
  ResumeFrom resume;  // auto | never | PATH
};

// [metrics]: what rank 0 reports.
struct MetricsConfig {
  int64_t log_every_steps = 50;
  ProgressMode progress = ProgressMode::Auto;  // auto | bar | plain | off
  bool tensorboard = false;
};

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
  std::string source;  // path of the TOML file it came from ("" for defaults)
};

// A config or usage problem: the message starts with its location (FILE:LINE:COL or the override).
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads a TOML file strictly; overrides are "section.key=value" strings (without the leading --).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The text of a config file: a regular file of at most kMaxConfigBytes, else a ConfigError naming the path (a
// device, FIFO or endless file is refused without reading more than the limit).
constexpr size_t kMaxConfigBytes = size_t{1} << 20;
std::string read_config_file(const std::string& path);
Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});
// Every key with its resolved value, as TOML that load_config reads back.
std::string format_config(const Config& cfg);

}  // namespace ddp
