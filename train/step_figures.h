// StepFigures: a log interval's training loss and correct count, kept on the device and read where it is logged.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace ddp {

// Each micro-batch's mean loss, correct count and size are kept as they are (no operator runs for them per step);
// read() brings them to the host in one copy and sums them there in float64 (loss x samples), in order. Between reads
// nothing waits for the device, as a Python loop that keeps loss.detach() * n on the GPU until its interval ends.
// Every kFold micro-batches the kept figures are summed into one pair on the device, so that a long interval holds
// at most kFold of them.
class StepFigures {
 public:
  static constexpr size_t kFold = 64;
  struct Sums {
    double loss_sum = 0;  // mean loss x samples, summed in float64
    int64_t correct = 0;
  };
  // loss: float32 [] (a micro-batch's mean, detached), correct: int64 [], on the same device.
  void add(const torch::Tensor& loss, const torch::Tensor& correct, int64_t samples);
  // Also reads these running sums (float64 [] and int64 [], added to on the device by a replayed CUDA graph), and
  // zeroes them where it reads them.
  void track(torch::Tensor loss_sum, torch::Tensor correct);
  // The sums since the last read (zero when nothing was added); then nothing is kept.
  Sums read();

 private:
  void fold();
  std::vector<torch::Tensor> losses_, correct_;
  std::vector<int64_t> samples_;
  // float64 [2]: loss x samples and correct of the micro-batches folded so far; may be undefined.
  torch::Tensor folded_;
  torch::Tensor tracked_loss_sum_, tracked_correct_;  // track()'s; may be undefined
};

}  // namespace ddp
