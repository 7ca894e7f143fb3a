// ThreadStack: a real-time signal to one thread at a time, whose handler records backtrace() into a static buffer;
// the asking thread then names the frames (dladdr, demangled).
#include "distributed/thread_stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

namespace ddp {
namespace {

constexpr int kMaxFrames = 64;
void* g_frames[kMaxFrames];
std::atomic<int> g_frame_count{-1};  // -1: no stack taken since the last request
std::atomic<pid_t> g_target_tid{0};  // the thread asked now: a late answer of an earlier one is ignored
std::atomic<pid_t> g_watched_tid{0};
std::mutex g_request;  // one request at a time

int stack_signal() { return SIGRTMIN + 7; }

void on_stack_signal(int) {
  // backtrace() is safe here once warmed up (libgcc's unwinder loaded by watch_this_thread, outside a handler).
  const int saved_errno = errno;
  if (static_cast<pid_t>(syscall(SYS_gettid)) == g_target_tid.load(std::memory_order_acquire))
    g_frame_count.store(backtrace(g_frames, kMaxFrames), std::memory_order_release);
  errno = saved_errno;
}

std::string frame_name(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || !info.dli_fname) return "?";
  std::string file = info.dli_fname;
  file = file.substr(file.rfind('/') + 1);
  char offset[32];
  if (!info.dli_sname) {
    std::snprintf(
        offset, sizeof offset, "+0x%lx",
        static_cast<unsigned long>(reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_fbase)));
    return file + offset;
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  const std::string name = status == 0 && demangled ? demangled : info.dli_sname;
  std::free(demangled);
  std::snprintf(
      offset, sizeof offset, "+0x%lx",
      static_cast<unsigned long>(reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_saddr)));
  return file + ": " + name + offset;
}

// Thread `tid`'s frames, innermost first; empty when it does not answer within `wait`. Holds g_request.
std::vector<std::string> frames_of(pid_t tid, std::chrono::milliseconds wait) {
  g_frame_count.store(-1);
  g_target_tid.store(tid, std::memory_order_release);
  std::vector<std::string> frames;
  if (syscall(SYS_tgkill, getpid(), tid, stack_signal()) == 0) {
    const auto until = std::chrono::steady_clock::now() + wait;
    int n = -1;
    while ((n = g_frame_count.load(std::memory_order_acquire)) < 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (int i = 2; i < n; ++i) frames.push_back(frame_name(g_frames[i]));  // 0, 1: the handler, the signal return
  }
  g_target_tid.store(0, std::memory_order_release);
  return frames;
}

std::string thread_name(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

void watch_this_thread() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    void* warm[1];
    backtrace(warm, 1);
    struct sigaction sa {};
    sa.sa_handler = on_stack_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(stack_signal(), &sa, nullptr);
  });
  g_watched_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
}

std::vector<std::string> stack_of_watched_thread(std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(g_request);
  const pid_t tid = g_watched_tid.load();
  if (tid == 0) return {};
  return frames_of(tid, wait);
}

std::vector<ThreadStacks> stacks_of_other_threads(std::chrono::milliseconds wait_each, size_t max_stacks) {
  std::lock_guard<std::mutex> lock(g_request);
  if (g_watched_tid.load() == 0) return {};  // the handler is installed with the watched thread
  const auto self = static_cast<pid_t>(syscall(SYS_gettid));
  std::vector<pid_t> tids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (tid > 0 && tid != self && tid != g_watched_tid.load()) tids.push_back(tid);
  }
  std::sort(tids.begin(), tids.end());
  std::map<std::vector<std::string>, ThreadStacks> alike;
  for (const pid_t tid : tids) {
    std::vector<std::string> frames = frames_of(tid, wait_each);
    ThreadStacks& group = alike[frames];
    group.frames = std::move(frames);
    group.tids.push_back(tid);
    group.names.push_back(thread_name(tid));
  }
  std::vector<ThreadStacks> out;
  for (auto& [frames, group] : alike) out.push_back(std::move(group));
  std::stable_sort(out.begin(), out.end(),
                   [](const ThreadStacks& a, const ThreadStacks& b) { return a.tids.size() > b.tids.size(); });
  if (out.size() > max_stacks) out.resize(max_stacks);
  return out;
}

}  // namespace ddp
