// LoaderThreads: the threads that read samples for BatchLoaders, each running ATen's loops on itself alone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ddp {

class BatchLoader;

// `count` threads serving the loaders attached to them, the newest first (an evaluation's loader before the training
// loader's next batches). The loaders' state is guarded by the threads' lock.
class LoaderThreads {
 public:
  explicit LoaderThreads(int64_t count);
  ~LoaderThreads();
  LoaderThreads(const LoaderThreads&) = delete;
  LoaderThreads& operator=(const LoaderThreads&) = delete;
  int64_t size() const { return static_cast<int64_t>(threads_.size()); }

 private:
  friend class BatchLoader;
  void attach(BatchLoader* loader);
  // Returns once no thread runs the loader's work.
  void detach(BatchLoader* loader);
  void serve(int64_t id);

  std::mutex mu_;
  // Work to claim may have come: a loader attached, an epoch planned, room for another batch ahead. A thread that
  // finishes a task claims the next without waiting, so no task's end wakes the others.
  std::condition_variable work_;
  std::vector<BatchLoader*> loaders_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// ATen's intra-op parallelism off for the calling thread only: its at::parallel_for loops run inline. A loader
// thread is one of data.workers threads, as each of DataLoader's worker processes runs torch.set_num_threads(1)
// (torch/utils/data/_utils/worker.py). at::set_num_threads would not do: it sets the count every thread of the
// process starts from (and MKL's and the pthreadpool's), and c10::ParallelGuard is not consulted by parallel_for's
// choice in LibTorch's OpenMP build (at::in_parallel_region() is omp_in_parallel() there). That build's
// at::get_num_threads() is the calling thread's omp_get_max_threads() (aten/src/ATen/ParallelOpenMP.cpp), an OpenMP
// setting of each thread: one for this one. No-op where LibTorch was built without OpenMP.
void run_aten_inline_on_this_thread();

}  // namespace ddp
