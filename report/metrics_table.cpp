// The metrics table's rows (field order as metrics.jsonl carries them), the values they read, and its Markdown.
#include "report/metrics_table.h"

#include <cmath>

namespace ddp {
namespace {

using Value = std::optional<MetricValue>;
using TrainRead = Value (*)(const TrainView&);
using EvalRead = Value (*)(const EvalView&);

struct Tag {
  const char* tag;
  const char* no_tag;
};
Tag tag(const char* name) { return {name, nullptr}; }
Tag no_tag(const char* why) { return {nullptr, why}; }

constexpr auto kInteger = MetricType::kInteger;
constexpr auto kNumber = MetricType::kNumber;
constexpr auto kString = MetricType::kString;

MetricRow train(const char* field, MetricType type, Tag t, Presence when, const char* doc, TrainRead read) {
  return {RecordKind::kTrain, field, type, t.tag, t.no_tag, when, doc, read, nullptr};
}
// A figure the training step records by this name where it computes it (StepRecord::figures), in every train record.
MetricRow recorded(const char* field, Tag t, const char* doc) {
  return {RecordKind::kTrain, field, kNumber, t.tag, t.no_tag, Presence::kAlways, doc, nullptr, nullptr, true};
}
MetricRow eval(const char* field, MetricType type, Tag t, Presence when, const char* doc, EvalRead read) {
  return {RecordKind::kEval, field, type, t.tag, t.no_tag, when, doc, nullptr, read};
}

Value if_set(const std::optional<double>& v) { return v ? Value(*v) : std::nullopt; }
Value if_counted(int64_t v) { return v >= 0 ? Value(v) : std::nullopt; }  // -1: not counted in this run

std::vector<MetricRow> make_table() {
  using P = Presence;
  const char* kStep = "the step axis of every scalar of the record";
  return {
      train("kind", kString, no_tag("a string"), P::kAlways, "`\"train\"`",
            [](const TrainView&) -> Value { return std::string("train"); }),
      train("step", kInteger, no_tag(kStep), P::kAlways, "optimizer steps done, the logged one included",
            [](const TrainView& v) -> Value { return v.step.step; }),
      train("epoch", kInteger, tag("train/epoch"), P::kAlways, "the epoch of the logged step (1-based)",
            [](const TrainView& v) -> Value { return v.step.epoch; }),
      train("loss", kNumber, tag("train/loss"), P::kAlways, "mean training loss over the interval's samples",
            [](const TrainView& v) -> Value { return v.step.loss; }),
      train("accuracy", kNumber, tag("train/accuracy"), P::kAlways,
            "fraction of the interval's training samples classified right (a batch mixed by data.mixup_alpha or "
            "data.cutmix_alpha: its top output is the mixed target's dominant label)",
            [](const TrainView& v) -> Value { return v.step.accuracy; }),
      train("lr", kNumber, tag("lr"), P::kAlways, "the learning rate of the logged step",
            [](const TrainView& v) -> Value { return v.step.lr; }),
      train("samples_per_s", kNumber, tag("perf/samples_per_s"), P::kAlways,
            "training samples per second over the interval, the whole job (its evaluations and checkpoint saves left "
            "out)",
            [](const TrainView& v) -> Value { return v.step.samples_per_s; }),
      train("samples", kInteger, tag("train/samples"), P::kAlways, "training samples in the interval",
            [](const TrainView& v) -> Value { return v.step.samples; }),
      train("loss_scale", kNumber, tag("amp/loss_scale"), P::kAlways,
            "the loss scaler's scale after the logged step (1 without loss scaling)",
            [](const TrainView& v) -> Value { return v.step.loss_scale; }),
      train("skipped_steps", kInteger, tag("amp/skipped_steps"), P::kAlways,
            "steps the loss scaler skipped (inf/NaN gradients) so far in this run",
            [](const TrainView& v) -> Value { return v.step.skipped_steps; }),
      recorded("grad_norm", tag("train/grad_norm"),
               "global L2 norm of the logged step's unscaled gradients, before clipping (null where not finite)"),
      recorded("param_norm", tag("train/param_norm"),
               "global L2 norm of the parameters after the logged step (torch.nn.utils.get_total_norm over them)"),
      train("tflops", kNumber, tag("perf/tflops"), P::kFlopsCounted,
            "achieved TFLOP/s of the whole job: FLOPs per training sample x `samples_per_s`",
            [](const TrainView& v) { return if_set(v.tflops); }),
      train("mfu", kNumber, tag("perf/mfu"), P::kKnownGpuPeak,
            "`tflops` over the world's dense peak TFLOP/s in the run's precision",
            [](const TrainView& v) { return if_set(v.mfu); }),
      train("bad_samples", kInteger, tag("data/bad_samples"), P::kEncodedImages,
            "unreadable training samples replaced so far in this run (`data.on_bad_sample = \"skip\"`)",
            [](const TrainView& v) { return if_counted(v.step.bad_samples); }),
      train("nonfinite_skips", kInteger, tag("train/nonfinite_skips"), P::kNonfiniteSkip,
            "steps skipped for non-finite gradients so far in this run",
            [](const TrainView& v) { return if_counted(v.step.nonfinite_skips); }),
      train("bytes_sent", kNumber, tag("comm/bytes_sent"), P::kMultiRank,
            "bytes of gradients rank 0 handed to all-reduces in the logged step: every bucket, in float16 or "
            "bfloat16 under `dist.grad_compression` = \"fp16\" or \"bf16\"; the values gathered from the buckets' "
            "non-zero positions (or whole buckets) under `dist.skip_zero_gradients`; under \"powersgd\" whole buckets "
            "before `dist.powersgd_start_step`, then the uncompressed tensors, P and Q (a ring all-reduce sends "
            "2 (world - 1) / world times this)",
            [](const TrainView& v) { return if_set(v.step.bytes_sent); }),
      train("compression_rate", kNumber, tag("comm/compression_rate"), P::kPowerSgd,
            "gradient elements before over after compression in the compressed steps so far (PowerSGDState's "
            "compression_stats); 0 before compression starts",
            [](const TrainView& v) { return if_set(v.step.compression_rate); }),
      train("residual_norm", kNumber, tag("comm/residual_norm"), P::kPowerSgd,
            "L2 norm of rank 0's error-feedback residuals after the logged step (what compression left out, carried "
            "into the next); 0 without `dist.powersgd_error_feedback`, before compression starts and after a step the "
            "optimizer skipped for inf/NaN gradients (the residuals start over)",
            [](const TrainView& v) { return if_set(v.step.residual_norm); }),
      train("gpu_mem_peak_mib", kNumber, tag("perf/gpu_mem_peak_mib"), P::kCuda,
            "the CUDA caching allocator's peak so far, MiB, max over ranks",
            [](const TrainView& v) { return if_set(v.gpu_mem_peak_mib); }),
      train("rss_peak_mib", kNumber, tag("perf/rss_peak_mib"), P::kAlways,
            "the largest peak RSS of any rank so far, MiB",
            [](const TrainView& v) -> Value { return v.split.rss_peak_mib; }),
      train("time_data_s", kNumber, tag("time/data_s"), P::kAlways,
            "seconds per step of the interval waiting for the next batch, mean over ranks",
            [](const TrainView& v) -> Value { return v.split.mean.data; }),
      train("time_compute_s", kNumber, tag("time/compute_s"), P::kAlways,
            "seconds per step in forward and backward, less the wait for the gradient all-reduce, mean over ranks",
            [](const TrainView& v) -> Value { return v.split.mean.compute; }),
      train("time_comm_s", kNumber, tag("time/comm_s"), P::kAlways,
            "seconds per step at backward's end waiting for the gradient all-reduce, mean over ranks",
            [](const TrainView& v) -> Value { return v.split.mean.comm; }),
      train("time_optimizer_s", kNumber, tag("time/optimizer_s"), P::kAlways,
            "seconds per step in unscale, norm, clip, optimizer step and EMA, mean over ranks",
            [](const TrainView& v) -> Value { return v.split.mean.optimizer; }),
      train("slowest_rank", kInteger, tag("time/slowest_rank"), P::kMultiRank,
            "the rank that did the most work (data, compute, optimizer) in the interval",
            [](const TrainView& v) { return v.split.slowest ? Value(v.split.slowest->rank) : std::nullopt; }),
      train("slowest_phase", kString, no_tag("a string"), P::kMultiRank,
            "the phase in which that rank exceeds the median rank most: data, compute or optimizer",
            [](const TrainView& v) { return v.split.slowest ? Value(v.split.slowest->phase) : std::nullopt; }),
      train("slowest_excess_s", kNumber, tag("time/slowest_excess_s"), P::kMultiRank,
            "that rank's work less the median rank's, seconds per step",
            [](const TrainView& v) { return v.split.slowest ? Value(v.split.slowest->excess_s) : std::nullopt; }),
      train("wall_s", kNumber, tag("time/wall_s"), P::kAlways, "seconds since training started",
            [](const TrainView& v) -> Value { return v.wall_s; }),

      eval("kind", kString, no_tag("a string"), P::kAlways, "`\"eval\"`",
           [](const EvalView&) -> Value { return std::string("eval"); }),
      eval("step", kInteger, no_tag(kStep), P::kAlways, "optimizer steps done",
           [](const EvalView& v) -> Value { return v.eval.step; }),
      eval("epoch", kInteger, tag("eval/epoch"), P::kAlways, "epochs done",
           [](const EvalView& v) -> Value { return v.eval.epoch; }),
      eval("loss", kNumber, tag("eval/loss"), P::kAlways,
           "mean cross-entropy loss over the test split (without training.label_smoothing)",
           [](const EvalView& v) -> Value { return v.eval.loss; }),
      eval("accuracy", kNumber, tag("eval/accuracy"), P::kAlways, "`correct` / `total`",
           [](const EvalView& v) -> Value { return v.eval.accuracy; }),
      eval("correct", kInteger, tag("eval/correct"), P::kAlways, "test samples classified right",
           [](const EvalView& v) -> Value { return v.eval.correct; }),
      eval("accuracy_top5", kNumber, tag("eval/accuracy_top5"), P::kMoreThanFiveClasses, "`correct_top5` / `total`",
           [](const EvalView& v) { return v.eval.correct_top5 >= 0 ? Value(v.eval.accuracy_top5) : std::nullopt; }),
      eval("correct_top5", kInteger, tag("eval/correct_top5"), P::kMoreThanFiveClasses,
           "test samples whose label is among the 5 largest outputs, as `torch.topk(out, 5)`",
           [](const EvalView& v) { return if_counted(v.eval.correct_top5); }),
      eval("loss_ema", kNumber, tag("eval/loss_ema"), P::kEma, "`loss` of `training.ema_decay`'s averaged weights",
           [](const EvalView& v) { return std::isnan(v.eval.accuracy_ema) ? std::nullopt : Value(v.eval.loss_ema); }),
      eval("accuracy_ema", kNumber, tag("eval/accuracy_ema"), P::kEma,
           "`accuracy` of `training.ema_decay`'s averaged weights",
           [](const EvalView& v) {
             return std::isnan(v.eval.accuracy_ema) ? std::nullopt : Value(v.eval.accuracy_ema);
           }),
      eval("total", kInteger, tag("eval/total"), P::kAlways, "test samples evaluated",
           [](const EvalView& v) -> Value { return v.eval.total; }),
      eval("wall_s", kNumber, tag("eval/wall_s"), P::kAlways,
           "seconds since training (or the evaluation alone) started",
           [](const EvalView& v) -> Value { return v.wall_s; }),
  };
}

const char* type_text(MetricType t) {
  switch (t) {
    case MetricType::kInteger:
      return "integer";
    case MetricType::kNumber:
      return "number";
    case MetricType::kString:
      return "string";
  }
  return "";
}

}  // namespace

const std::vector<MetricRow>& metrics_table() {
  static const std::vector<MetricRow> table = make_table();
  return table;
}

MetricValues train_values(const TrainView& view) {
  MetricValues out;
  for (const MetricRow& row : metrics_table())
    if (row.kind == RecordKind::kTrain)
      if (Value v = row.recorded ? Value(view.step.figures.get(row.field)) : row.train(view))
        out.emplace_back(&row, std::move(*v));
  return out;
}

MetricValues eval_values(const EvalView& view) {
  MetricValues out;
  for (const MetricRow& row : metrics_table())
    if (row.kind == RecordKind::kEval)
      if (Value v = row.eval(view)) out.emplace_back(&row, std::move(*v));
  return out;
}

std::string presence_text(Presence when) {
  switch (when) {
    case Presence::kAlways:
      return "always";
    case Presence::kMultiRank:
      return "more than one rank";
    case Presence::kCuda:
      return "on CUDA";
    case Presence::kKnownGpuPeak:
      return "on a GPU whose peak FLOP/s ddptrain knows";
    case Presence::kFlopsCounted:
      return "the model's FLOPs per sample counted (not 0)";
    case Presence::kEncodedImages:
      return "`data.dataset = \"image_folder\"` or `\"webdataset\"`";
    case Presence::kNonfiniteSkip:
      return "`training.on_nonfinite = \"skip\"`";
    case Presence::kMoreThanFiveClasses:
      return "more than 5 classes";
    case Presence::kEma:
      return "`training.ema_decay` > 0";
    case Presence::kPowerSgd:
      return "`dist.grad_compression = \"powersgd\"`";
  }
  return "";
}

std::string metrics_markdown() {
  std::string out =
      "| record | field | type | TensorBoard tag | present | what |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const MetricRow& row : metrics_table()) {
    const std::string tb = row.tag ? "`" + std::string(row.tag) + "`" : "none: " + std::string(row.no_tag);
    out += std::string("| ") + (row.kind == RecordKind::kTrain ? "train" : "eval") + " | `" + row.field + "` | " +
           type_text(row.type) + " | " + tb + " | " + presence_text(row.when) + " | " + row.doc + " |\n";
  }
  return out;
}

}  // namespace ddp
