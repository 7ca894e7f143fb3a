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
// With profile.memory_snapshot on CUDA, the CUDA caching allocator records its history over the same steps
// (torch.cuda.memory._record_memory_history) and writes job.out_dir/profile/memory_rank<R>.pickle beside the trace:
// torch.cuda.memory._dump_snapshot's file, which pytorch.org/memory_viz draws.
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
  // The memory snapshot the trace's end wrote, if any.
  const std::optional<std::string>& memory_snapshot() const { return snapshot_written_; }
  // profile.memory_snapshot was asked for on a device without the CUDA caching allocator.
  bool memory_snapshot_unavailable() const { return cfg_.steps > 0 && cfg_.memory_snapshot && !records_memory_; }

 private:
  std::optional<std::string> write();

  ProfileConfig cfg_;
  std::string path_, snapshot_path_;
  c10::Device device_;
  bool records_memory_;
  bool started_ = false, running_ = false;
  std::optional<std::string> snapshot_written_;
};

}  // namespace ddp
