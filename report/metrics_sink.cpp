// MetricsSink: one record per point in metrics.jsonl (field order fixed, README), its scalars in TensorBoard.
#include "report/metrics_sink.h"

#include <filesystem>

namespace ddp {

MetricsSink::MetricsSink(const std::string& out_dir, bool append, bool tensorboard) {
  std::filesystem::create_directories(out_dir);
  const std::string path = out_dir + "/metrics.jsonl";
  if (!append) std::filesystem::remove(path);
  jsonl_ = std::make_unique<JsonlWriter>(path);
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(out_dir + "/tensorboard");
}

void MetricsSink::train(const TrainPoint& p) {
  if (jsonl_) {
    JsonRecord r;
    r.add("kind", "train")
        .add("step", p.step)
        .add("epoch", p.epoch)
        .add("loss", p.loss)
        .add("accuracy", p.accuracy)
        .add("lr", p.lr)
        .add("samples_per_s", p.samples_per_s)
        .add("samples", p.samples)
        .add("loss_scale", p.loss_scale)
        .add("skipped_steps", p.skipped_steps)
        .add("grad_norm", p.grad_norm);
    if (p.gpu_mem_peak_mib) r.add("gpu_mem_peak_mib", *p.gpu_mem_peak_mib);
    jsonl_->write(r.add("wall_s", p.wall_s));
  }
  if (!tensorboard_) return;
  if (p.gpu_mem_peak_mib) tensorboard_->add_scalar("perf/gpu_mem_peak_mib", *p.gpu_mem_peak_mib, p.step);
  tensorboard_->add_scalar("train/loss", p.loss, p.step);
  tensorboard_->add_scalar("train/accuracy", p.accuracy, p.step);
  tensorboard_->add_scalar("lr", p.lr, p.step);
  tensorboard_->add_scalar("amp/loss_scale", p.loss_scale, p.step);
  tensorboard_->add_scalar("perf/samples_per_s", p.samples_per_s, p.step);
  tensorboard_->add_scalar("amp/skipped_steps", static_cast<double>(p.skipped_steps), p.step);
}

void MetricsSink::eval(const EvalPoint& p) {
  const bool top5 = p.correct_top5 >= 0;
  if (jsonl_) {
    JsonRecord r;
    r.add("kind", "eval")
        .add("step", p.step)
        .add("epoch", p.epoch)
        .add("loss", p.loss)
        .add("accuracy", p.accuracy)
        .add("correct", p.correct);
    if (top5) r.add("accuracy_top5", p.accuracy_top5).add("correct_top5", p.correct_top5);
    jsonl_->write(r.add("total", p.total).add("wall_s", p.wall_s));
  }
  if (!tensorboard_) return;
  tensorboard_->add_scalar("eval/loss", p.loss, p.step);
  tensorboard_->add_scalar("eval/accuracy", p.accuracy, p.step);
  if (top5) tensorboard_->add_scalar("eval/accuracy_top5", p.accuracy_top5, p.step);
}

void MetricsSink::purge_from(int64_t step) {
  if (tensorboard_) tensorboard_->purge_from(step);
}

}  // namespace ddp
