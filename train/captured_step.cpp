// CapturedStep on at::cuda::CUDAGraph (CUDA builds); elsewhere its constructor says why it cannot be.
#include "train/captured_step.h"

#ifdef DDP_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <stdexcept>

namespace ddp {

#ifdef DDP_WITH_CUDA

namespace {

// `waiter` waits for the work enqueued on `stream` so far (torch.cuda.Stream.wait_stream).
void wait_for(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& stream) {
  at::cuda::CUDAEvent done;
  done.record(stream);
  done.block(waiter);
}

}  // namespace

struct CapturedStep::Impl {
  explicit Impl(c10::Device d) : device(d), stream(c10::cuda::getStreamFromPool(false, d.index())) {}
  c10::Device device;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAGraph graph;
  bool captured = false;

  template <class F>
  void on_side_stream(const F& f) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
    wait_for(stream, current);
    {
      c10::cuda::CUDAStreamGuard guard(stream);
      f();
    }
    wait_for(current, stream);
  }
};

CapturedStep::CapturedStep(c10::Device device) {
  if (!device.is_cuda())
    throw std::runtime_error("training.cuda_graph needs a CUDA device, and this rank trains on " + device.str());
  impl_ = std::make_unique<Impl>(device);
}

void CapturedStep::warm_up(const std::function<void()>& step) { impl_->on_side_stream(step); }

void CapturedStep::capture(const std::function<void()>& step) {
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  impl_->on_side_stream([&] {
    impl_->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      step();
    } catch (...) {
      try {
        impl_->graph.capture_end();
      } catch (...) {
      }
      throw;
    }
    impl_->graph.capture_end();
  });
  impl_->captured = true;
}

void CapturedStep::replay() { impl_->graph.replay(); }

#else

struct CapturedStep::Impl {};

CapturedStep::CapturedStep(c10::Device device) {
  throw std::runtime_error("training.cuda_graph needs a CUDA build of ddptrain; this one was built without CUDA (" +
                           device.str() + ")");
}

void CapturedStep::warm_up(const std::function<void()>& step) { step(); }
void CapturedStep::capture(const std::function<void()>&) {}
void CapturedStep::replay() {}

#endif

CapturedStep::~CapturedStep() = default;

bool CapturedStep::captured() const {
#ifdef DDP_WITH_CUDA
  return impl_->captured;
#else
  return false;
#endif
}

}  // namespace ddp
