// Config schema: every section and key of the TOML config, bound to the fields of ddp::Config.
#include "config/config_schema.h"

#include <algorithm>

namespace ddp {
namespace {

// A field of `kind` bound to `target`; every other member keeps its default.
FieldSpec field(const std::string& key, FieldKind kind, void* target) {
  FieldSpec f;
  f.key = key;
  f.kind = kind;
  f.target = target;
  return f;
}

FieldSpec boolean(const std::string& key, bool* target) { return field(key, FieldKind::Bool, target); }

FieldSpec integer(const std::string& key, int64_t* target, double min, double max) {
  FieldSpec f = field(key, FieldKind::Int, target);
  f.min = min;
  f.max = max;
  return f;
}

// Every number has both bounds (`open_min` / `open_max`: the bound itself is excluded).
FieldSpec real(const std::string& key, double* target, double min, bool open_min, double max, bool open_max) {
  FieldSpec f = field(key, FieldKind::Float, target);
  f.min = min;
  f.min_exclusive = open_min;
  f.max = max;
  f.max_exclusive = open_max;
  return f;
}

// A number whose value -1 stands for "the dataset's default" (data.mean, data.std).
FieldSpec real_or_default(const std::string& key, double* target, double min, bool open_min, double max) {
  FieldSpec f = real(key, target, min, open_min, max, false);
  f.default_marker = -1;
  return f;
}

FieldSpec text(const std::string& key, std::string* target) { return field(key, FieldKind::String, target); }

FieldSpec nonempty_text(const std::string& key, std::string* target) {
  FieldSpec f = text(key, target);
  f.nonempty = true;
  return f;
}

// A key whose value is one of E's names (config/choices.h), parsed to E at load.
template <class E>
FieldSpec choice(const std::string& key, E* target) {
  FieldSpec f = field(key, FieldKind::Choice, target);
  f.choices = choice_names<E>();
  f.set_choice = [target](const std::string& name) {
    const std::optional<E> value = parse_choice<E>(name);
    if (value) *target = *value;
    return value.has_value();
  };
  f.choice_text = [target] { return choice_name(*target); };
  return f;
}

// checkpoint.resume: auto | never | any other non-empty value, a checkpoint path.
FieldSpec resume_choice(const std::string& key, ResumeFrom* target) {
  FieldSpec f = field(key, FieldKind::Choice, target);
  f.choices = choice_names<ResumeMode>();
  f.choice_or_path = true;
  f.set_choice = [target](const std::string& name) {
    const std::optional<ResumeMode> mode = parse_choice<ResumeMode>(name);
    if (!mode && name.empty()) return false;
    *target = mode ? ResumeFrom{*mode, ""} : ResumeFrom{ResumeMode::Path, name};
    return true;
  };
  f.choice_text = [target] { return target->mode == ResumeMode::Path ? target->path : choice_name(target->mode); };
  return f;
}

FieldSpec text_list(const std::string& key, std::vector<std::string>* target) {
  return field(key, FieldKind::StringList, target);
}

// The ranges (README "Failure behaviour and security"): wide enough for any real run, small enough that no
// arithmetic on them (steps = epochs x steps per epoch, batch x world x accumulation, seconds -> milliseconds)
// overflows and no size asks for more memory than the values can honestly need.
constexpr bool kClosed = false, kOpen = true;
constexpr double kMaxSeed = 4611686018427387904.0;  // 2^62: seed + epoch, seed + rank stay within int64
constexpr double kMaxBatch = 1 << 20;               // samples per rank and micro-batch
constexpr double kMaxSamples = 1e8;                 // synthetic split sizes
constexpr double kMaxClasses = 1e6;
constexpr double kMaxEpochs = 1e6;
constexpr double kMaxSteps = 1e12;                  // optimizer-step counts and intervals
constexpr double kMaxSeconds = 7 * 86400.0;         // timeouts: one week
constexpr double kMaxFloat32 = 3.4028234663852886e38;  // the loss scale lives in float32


}  // namespace

const FieldSpec* SectionSpec::find(const std::string& key) const {
  for (const auto& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

std::vector<SectionSpec> config_schema(Config& c) {
  return {
      {"job",
       {text("name", &c.job.name), nonempty_text("out_dir", &c.job.out_dir), integer("seed", &c.job.seed, 0, kMaxSeed),
        integer("threads", &c.job.threads, 0, 1024),
        choice("step_memory", &c.job.step_memory)}},
      {"data",
       {choice("dataset", &c.data.dataset), text("dir", &c.data.dir),
        integer("batch_size", &c.data.batch_size, 1, kMaxBatch),
        integer("eval_batch_size", &c.data.eval_batch_size, 1, kMaxBatch), boolean("shuffle", &c.data.shuffle),
        boolean("drop_last", &c.data.drop_last), integer("workers", &c.data.workers, 0, 64),
        integer("prefetch", &c.data.prefetch, 1, 1024), real_or_default("mean", &c.data.mean, 0, kClosed, 1),
        real_or_default("std", &c.data.std, 0, kOpen, 1000), boolean("pin_memory", &c.data.pin_memory),
        boolean("download", &c.data.download), text_list("mirrors", &c.data.mirrors),
        integer("synthetic_train_size", &c.data.synthetic_train_size, 1, kMaxSamples),
        integer("synthetic_test_size", &c.data.synthetic_test_size, 1, kMaxSamples),
        integer("image_size", &c.data.image_size, 16, 4096)}},
      {"model",
       {choice("name", &c.model.name),
        integer("in_channels", &c.model.in_channels, 1, 4096),
        integer("num_classes", &c.model.num_classes, 2, kMaxClasses),
        real("dropout", &c.model.dropout, 0, kClosed, 1, kClosed), text("init_from", &c.model.init_from),
        choice("memory_format", &c.model.memory_format),
        boolean("skip_padding_taps", &c.model.skip_padding_taps)}},
      {"optimizer",
       {choice("name", &c.optimizer.name), real("lr", &c.optimizer.lr, 0, kOpen, 100, kClosed),
        real("momentum", &c.optimizer.momentum, 0, kClosed, 1, kClosed),
        real("weight_decay", &c.optimizer.weight_decay, 0, kClosed, 100, kClosed),
        boolean("nesterov", &c.optimizer.nesterov), real("beta1", &c.optimizer.beta1, 0, kClosed, 1, kOpen),
        real("beta2", &c.optimizer.beta2, 0, kClosed, 1, kOpen), real("eps", &c.optimizer.eps, 0, kOpen, 1, kClosed),
        choice("scale_lr", &c.optimizer.scale_lr)}},
      {"lr_scheduler",
       {integer("warmup_steps", &c.lr_scheduler.warmup_steps, 0, kMaxSteps),
        choice("decay", &c.lr_scheduler.decay),
        real("min_lr", &c.lr_scheduler.min_lr, 0, kClosed, 100, kClosed),
        integer("step_size", &c.lr_scheduler.step_size, 1, kMaxSteps),
        real("gamma", &c.lr_scheduler.gamma, 0, kOpen, 1, kClosed)}},
      {"training",
       {integer("epochs", &c.training.epochs, 1, kMaxEpochs),
        integer("max_steps", &c.training.max_steps, 0, kMaxSteps),
        integer("grad_accum_steps", &c.training.grad_accum_steps, 1, 1 << 20),
        real("clip_grad_norm", &c.training.clip_grad_norm, 0, kClosed, 1e6, kClosed),
        integer("eval_every_epochs", &c.training.eval_every_epochs, 0, kMaxEpochs),
        boolean("deterministic", &c.training.deterministic), boolean("cudnn_benchmark", &c.training.cudnn_benchmark)}},
      {"amp",
       {boolean("enabled", &c.amp.enabled), choice("dtype", &c.amp.dtype),
        choice("loss_scaling", &c.amp.loss_scaling),
        real("init_scale", &c.amp.init_scale, 0, kOpen, kMaxFloat32, kClosed),
        real("growth_factor", &c.amp.growth_factor, 1, kOpen, 1000, kClosed),
        real("backoff_factor", &c.amp.backoff_factor, 0, kOpen, 1, kOpen),
        integer("growth_interval", &c.amp.growth_interval, 1, kMaxSteps)}},
      {"dist",
       {choice("device", &c.dist.device),
        choice("backend", &c.dist.backend),
        real("timeout_s", &c.dist.timeout_s, 0, kOpen, kMaxSeconds, kClosed),
        real("bucket_cap_mb", &c.dist.bucket_cap_mb, 0, kOpen, 65536, kClosed),
        boolean("broadcast_buffers", &c.dist.broadcast_buffers),
        choice("grad_compression", &c.dist.grad_compression),
        boolean("find_unused_parameters", &c.dist.find_unused_parameters),
        boolean("gradient_as_bucket_view", &c.dist.gradient_as_bucket_view),
        choice("allreduce", &c.dist.allreduce),
        integer("check_replicas_every", &c.dist.check_replicas_every, 0, kMaxSteps)}},
      {"checkpoint",
       {integer("every_steps", &c.checkpoint.every_steps, 0, kMaxSteps),
        integer("every_epochs", &c.checkpoint.every_epochs, 0, kMaxEpochs),
        integer("keep_last", &c.checkpoint.keep_last, 1, 1e6), integer("keep_best", &c.checkpoint.keep_best, 0, 1e6),
        text("dir", &c.checkpoint.dir), choice("on_error", &c.checkpoint.on_error),
        resume_choice("resume", &c.checkpoint.resume)}},
      {"metrics",
       {integer("log_every_steps", &c.metrics.log_every_steps, 1, kMaxSteps),
        choice("progress", &c.metrics.progress),
        boolean("tensorboard", &c.metrics.tensorboard)}},
  };
}

const char* kind_label(FieldKind kind) {
  switch (kind) {
    case FieldKind::Bool:
      return "bool";
    case FieldKind::Int:
      return "int";
    case FieldKind::Float:
      return "float";
    case FieldKind::String:
      return "string";
    case FieldKind::Choice:
      return "choice";
    case FieldKind::StringList:
      return "list";
  }
  return "?";
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::string closest_match(const std::string& name, const std::vector<std::string>& candidates) {
  // A near miss by edit distance, else a name that contains the other ("optim" -> "optimizer").
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::string best_near, best_containing;
  size_t near_distance = limit + 1, containing_distance = std::string::npos;
  for (const auto& c : candidates) {
    size_t d = edit_distance(name, c);
    if (d < near_distance) {
      near_distance = d;
      best_near = c;
    }
    bool contains = name.size() >= 3 && (c.find(name) != std::string::npos || name.find(c) != std::string::npos);
    if (contains && d < containing_distance) {
      containing_distance = d;
      best_containing = c;
    }
  }
  return best_near.empty() ? best_containing : best_near;
}

}  // namespace ddp
