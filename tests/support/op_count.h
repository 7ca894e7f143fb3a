// OpCount: the ATen operators the current thread runs while it lives, counted by name through a RecordFunction
// callback (the events LibTorch's profiler records as cpu_op, every nesting level).
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <map>
#include <string>

namespace ddp::test {

class OpCount {
 public:
  OpCount() {
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          if (active_) ++(*active_)[fn.name()];
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
    active_ = &counts_;
  }
  ~OpCount() {
    active_ = nullptr;
    at::removeCallback(handle_);
  }
  OpCount(const OpCount&) = delete;
  OpCount& operator=(const OpCount&) = delete;

  // How often `name` ran ("aten::_local_scalar_dense").
  int64_t of(const std::string& name) const {
    const auto it = counts_.find(name);
    return it == counts_.end() ? 0 : it->second;
  }
  // Every "aten::" operator, all nesting levels.
  int64_t aten() const {
    int64_t n = 0;
    for (const auto& [name, count] : counts_)
      if (name.rfind("aten::", 0) == 0) n += count;
    return n;
  }
  // Reads of a tensor's value to the host: aten::_local_scalar_dense (item(), a bool of a tensor).
  int64_t host_reads() const { return of("aten::_local_scalar_dense"); }

 private:
  static inline thread_local std::map<std::string, int64_t>* active_ = nullptr;
  std::map<std::string, int64_t> counts_;
  at::CallbackHandle handle_;
};

}  // namespace ddp::test
