// Run reports rank 0 prints: the setup banner, evaluation results, and the summary at the end of training.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

struct EvalResult {
  double loss = 0;      // mean loss over the whole test split (all ranks)
  double accuracy = 0;  // correct / total
  int64_t correct = 0;
  int64_t total = 0;
  // Top-5 (the label among the five largest outputs); -1 when the model has 5 classes or fewer.
  int64_t correct_top5 = -1;
  double accuracy_top5 = -1;
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs = 0;
  EvalResult final_eval;
  double best_accuracy = 0;
  double wall_s = 0;
  double samples_per_s = 0;
  int64_t skipped_steps = 0;        // AMP steps skipped for inf/NaN
  double gpu_mem_peak_mib = -1;     // max over ranks of torch.cuda.max_memory_allocated(); < 0 on CPU
  int64_t checkpoints_written = 0;  // by this run
  std::string step_memory;          // job.step_memory = "planned": what the plan did; "" otherwise
  std::string model_path;           // final model.pt ("" when preempted)
  bool preempted = false;           // stopped by SIGTERM/SIGINT after writing a checkpoint
};

// What the banner shows of a run about to start.
struct BannerFacts {
  std::string job, backend, device, gpu;  // gpu: name and memory, "" on CPU
  int64_t world_size = 1;
  bool distributed = false;
  std::string allreduce, allreduce_note;
  std::string model, dataset, amp;  // amp: the autocast dtype, or "off"
  int64_t parameters = 0, train_size = 0, test_size = 0;
  int64_t batch_size = 0, grad_accum_steps = 1, steps_per_epoch = 0;
  std::string out_dir, init_from_note;
};

// Lines joined by "\n", no newline at the end.
std::string banner_text(const BannerFacts& f);
std::string eval_text(const EvalResult& e, const std::string& label);  // "eval LABEL: loss ... accuracy ..."
std::string summary_text(const TrainSummary& s);

}  // namespace ddp
