// Run reports: banner, evaluation line and summary table, as text.
#include "report/summary.h"

#include <cstdio>

namespace ddp {
namespace {

std::string report_fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string banner_text(const BannerFacts& f) {
  std::string out = "ddptrain: job " + f.job + " | world " + std::to_string(f.world_size) + " | backend " +
                    f.backend + " | device " + f.device + (f.gpu.empty() ? "" : " (" + f.gpu + ")");
  if (f.distributed)
    out += " | all-reduce " + (f.allreduce == "shm" ? std::string("shared memory") : f.allreduce) +
           (f.allreduce_note.empty() ? "" : " (shared memory not used: " + f.allreduce_note + ")");
  out += "\n  model " + f.model + " (" + std::to_string(f.parameters) + " parameters) | data " + f.dataset +
         " train " + std::to_string(f.train_size) + " test " + std::to_string(f.test_size);
  out += "\n  batch " + std::to_string(f.batch_size) + " per rank x " + std::to_string(f.world_size) + " ranks x " +
         std::to_string(f.grad_accum_steps) + " accumulation = " +
         std::to_string(f.batch_size * f.world_size * f.grad_accum_steps) + " per step | " +
         std::to_string(f.steps_per_epoch) + " steps/epoch | amp " + f.amp;
  out += "\n  outputs in " + f.out_dir;
  if (!f.init_from_note.empty()) out += "\n  init_from: " + f.init_from_note;
  return out;
}

std::string eval_text(const EvalResult& e, const std::string& label) {
  const std::string top5 = e.correct_top5 >= 0 ? " top-5 " + report_fmt("%.4f", e.accuracy_top5) + " (" +
                                                     std::to_string(e.correct_top5) + "/" + std::to_string(e.total) +
                                                     ")"
                                               : "";
  return "eval " + label + ": loss " + report_fmt("%.4f", e.loss) + " accuracy " + report_fmt("%.4f", e.accuracy) +
         " (" + std::to_string(e.correct) + "/" + std::to_string(e.total) + ")" + top5;
}

std::string summary_text(const TrainSummary& s) {
  std::string out = "summary";
  auto row = [&](const char* name, const std::string& value) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-22s %s", name, value.c_str());
    out += std::string("\n") + buf;
  };
  row("final eval accuracy",
      report_fmt("%.4f", s.final_eval.accuracy) + " (best " + report_fmt("%.4f", s.best_accuracy) + ")");
  if (s.final_eval.correct_top5 >= 0) row("final eval top-5", report_fmt("%.4f", s.final_eval.accuracy_top5));
  row("epochs done / steps", std::to_string(s.epochs) + " / " + std::to_string(s.steps));
  row("wall time", report_fmt("%.1f s", s.wall_s));
  row("mean samples/s", report_fmt("%.0f", s.samples_per_s));
  row("skipped AMP steps", std::to_string(s.skipped_steps));
  if (s.gpu_mem_peak_mib >= 0) row("peak GPU memory", report_fmt("%.0f MiB (max over ranks)", s.gpu_mem_peak_mib));
  row("checkpoints written", std::to_string(s.checkpoints_written));
  if (!s.step_memory.empty()) row("step memory", s.step_memory);
  row("model", s.model_path);
  return out;
}

}  // namespace ddp
