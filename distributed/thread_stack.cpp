// ThreadStack: a real-time signal to the watched thread, whose handler records backtrace() into a static buffer;
// the asking thread then names the frames (dladdr, demangled).
#include "distributed/thread_stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace ddp {
namespace {

constexpr int kMaxFrames = 64;
void* g_frames[kMaxFrames];
std::atomic<int> g_frame_count{-1};  // -1: no stack taken since the last request
std::atomic<pid_t> g_watched_tid{0};
std::mutex g_request;  // one request at a time

int stack_signal() { return SIGRTMIN + 7; }

void on_stack_signal(int) {
  // backtrace() is safe here once warmed up (libgcc's unwinder loaded by watch_this_thread, outside a handler).
  const int saved_errno = errno;
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
  g_frame_count.store(-1);
  if (syscall(SYS_tgkill, getpid(), tid, stack_signal()) != 0) return {};
  const auto until = std::chrono::steady_clock::now() + wait;
  int n = -1;
  while ((n = g_frame_count.load(std::memory_order_acquire)) < 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<std::string> frames;
  for (int i = 2; i < n; ++i) frames.push_back(frame_name(g_frames[i]));  // 0, 1: the handler and the signal return
  return frames;
}

}  // namespace ddp
