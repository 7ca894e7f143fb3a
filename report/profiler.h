// StepProfiler: profile.steps training steps traced by LibTorch's profiler (Kineto) into a Chrome/Perfetto trace.
#pragma once

#include "config/config.h"

#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>

namespace ddp {

// Traces optimizer steps profile.start_step .. start_step + steps - 1 of this rank, as torch.profiler.profile with
// CPU (and on CUDA, CUDA) activities records them, into job.out_dir/profile/rank<R>.json: the file
// torch.profiler's export_chrome_trace writes, which chrome://tracing, Perfetto and TensorBoard's profiler open.
// The training loop marks its phases (ddptrain::data, ::forward, ::backward, ::optimizer) as record_function ranges,
// which cost nothing while no trace runs. With profile.steps = 0 nothing is traced.
class StepProfiler {
 public:
  StepProfiler(const ProfileConfig& cfg, std::string out_dir, int64_t rank, c10::Device device);
  ~StepProfiler();
  // Step `step` (1-based) is about to start, its data loading first: the trace begins at profile.start_step.
  void step_begins(int64_t step);
  // Step `step` has ended: after the trace's last step, the trace is written; returns its path then.
  std::optional<std::string> step_ended(int64_t step);
  // Training is over: a trace still running (the run had fewer steps) is written; returns its path then.
  std::optional<std::string> finish();
  // The run asked for a trace and none was written (profile.start_step was never reached).
  bool missed() const { return cfg_.steps > 0 && !started_; }

 private:
  std::optional<std::string> write();

  ProfileConfig cfg_;
  std::string path_;
  c10::Device device_;
  bool started_ = false, running_ = false;
};

}  // namespace ddp
