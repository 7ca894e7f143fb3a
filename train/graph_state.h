// Trainer::GraphState: the tensors training.cuda_graph's captured step reads and writes, defined where the Trainer's
// constructor and destructor need it whole.
#pragma once

#include "train/captured_step.h"
#include "train/trainer.h"

#include <c10/core/Event.h>

namespace ddp {

// What the captured step reads and writes besides the model and optimizer: tensors that live as long as the graph,
// their addresses fixed in it.
struct Trainer::GraphState {
  explicit GraphState(c10::Device device, int64_t warmup)
      : captured(device), warmup_left(warmup), flag_ready(device.type()) {}
  CapturedStep captured;
  int64_t warmup_left;              // eager steps before the capture
  torch::Tensor images, labels;     // the static input: each batch is copied in before a replay
  torch::Tensor lr;                 // float32 []: the optimizer's learning rate, filled before each replay
  torch::Tensor loss_sum, correct;  // the replays' figures, summed on the device (read by figures_)
  torch::Tensor norm;               // the last replay's pre-clip gradient norm
  torch::Tensor flag;               // the last replay's non-finite check (no loss scaler): 1 when it skipped
  torch::Tensor flag_host;          // page-locked copy of `flag`
  c10::Event flag_ready;            // recorded after that copy
  int64_t flag_step = 0;            // the step whose flag is on its way; 0: none
};

}  // namespace ddp
