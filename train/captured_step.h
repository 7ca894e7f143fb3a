// CapturedStep: a training step captured once as a CUDA graph and replayed (at::cuda::CUDAGraph, PyTorch's recipe).
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>

namespace ddp {

// As PyTorch's CUDA Graphs notes do it (torch.cuda.graph): warm-up iterations and the capture run on a side stream
// that waits for the current one, and the current stream waits for them after; the capture starts from a synchronised
// device with the caching allocator's unused blocks released and takes a private memory pool; replays run on the
// current stream. Capture mode thread_local: other threads (the data loader's) may make CUDA calls meanwhile.
class CapturedStep {
 public:
  // Throws std::runtime_error where it cannot be: a device that is not CUDA, or a build without CUDA.
  explicit CapturedStep(c10::Device device);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // Runs `step` eagerly on the side stream (a warm-up iteration).
  void warm_up(const std::function<void()>& step);
  // Records `step` into the graph (its kernels do not run now).
  void capture(const std::function<void()>& step);
  bool captured() const;
  // Launches the captured kernels on the current stream.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
