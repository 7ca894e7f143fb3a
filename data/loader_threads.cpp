// LoaderThreads: claim a loader's rows under the lock, read them outside it.
#include "data/loader_threads.h"

#include "base/thread_name.h"
#include "data/loader.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <dlfcn.h>

#include <algorithm>
#include <string>

namespace ddp {

void run_aten_inline_on_this_thread() {
  // ATen's first parallel_for on a thread initialises its count (at::internal::lazy_init_num_threads, from the
  // process's at::set_num_threads): done first, so that it does not undo the setting below later.
  at::get_num_threads();
#if AT_PARALLEL_OPENMP
  // The OpenMP runtime LibTorch loaded (libgomp or libiomp5), looked up rather than linked: the build links no
  // OpenMP runtime of its own, and a second one would not be the one ATen's loops run on.
  using SetNumThreads = void (*)(int);
  static const auto set_num_threads = reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_num_threads) set_num_threads(1);
#endif
}

LoaderThreads::LoaderThreads(int64_t count) {
  for (int64_t id = 0; id < count; ++id) threads_.emplace_back([this, id] { serve(id); });
}

LoaderThreads::~LoaderThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
}

void LoaderThreads::attach(BatchLoader* loader) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    loaders_.push_back(loader);
  }
  work_.notify_all();
}

void LoaderThreads::detach(BatchLoader* loader) {
  std::unique_lock<std::mutex> lock(mu_);
  loaders_.erase(std::remove(loaders_.begin(), loaders_.end(), loader), loaders_.end());
  loader->ready_.wait(lock, [&] { return loader->running_ == 0; });
}

void LoaderThreads::serve(int64_t id) {
  name_this_thread("ddp-data-" + std::to_string(id));
  run_aten_inline_on_this_thread();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    BatchLoader* loader = nullptr;
    BatchLoader::Task task;
    work_.wait(lock, [&] {
      for (auto it = loaders_.rbegin(); !stop_ && it != loaders_.rend(); ++it)
        if ((*it)->claim(task)) {
          loader = *it;
          return true;
        }
      return stop_;
    });
    if (!loader) return;
    ++loader->running_;
    lock.unlock();
    std::exception_ptr error;
    try {
      loader->run(task);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    const bool batch_done = loader->finish(task, error);
    if (--loader->running_ == 0 || batch_done) loader->ready_.notify_all();
  }
}

}  // namespace ddp
