// LD_PRELOAD library for fault tests: fails, SIGKILLs, SIGTERMs or stops at one write/fsync/rename/unlink on a
// matching path.
//
// Environment (read once): DDP_FAULT_OP = write | fsync | rename | unlink | any; DDP_FAULT_PATH = a substring of the
// path (for write/fsync: the file the descriptor is open on; rename: either name; unlink: also remove()), or with a
// trailing $ the path's end (a folder's fsync without its files'); DDP_FAULT_NTH
// = which matching call (1-based, default 1); DDP_FAULT_ACTION = kill (SIGKILL; a write first writes half its bytes)
// | term (SIGTERM to the process, then the call goes on: a stop asked for in the middle of that file work) | stop
// (DDP_FAULT_OP = write only: the write writes half its bytes, then SIGSTOP halts the whole process there, for a test
// to kill what it likes while the file is partial; it says so on stderr; continued, the write finishes) | slow (the
// calling thread alone sleeps DDP_FAULT_SECONDS, default 10, then the call goes on: a slow disk; it says on stderr
// which thread, and every thread of the process, by name and scheduling policy) | enospc | erofs | eio (that call and
// every later matching one fails with that errno, like a full disk) | count (no fault: at the process's exit it says on
// stderr "fault shim: N matching calls", so that a test can pick an nth that a run reaches).
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct FaultPlan {
  std::string op, path, action;
  long nth = 1;
  long seconds = 10;
  int err = 0;
  bool active = false;
};

const FaultPlan& plan() {
  static const FaultPlan p = [] {
    FaultPlan f;
    const char* op = std::getenv("DDP_FAULT_OP");
    const char* path = std::getenv("DDP_FAULT_PATH");
    const char* action = std::getenv("DDP_FAULT_ACTION");
    const char* nth = std::getenv("DDP_FAULT_NTH");
    if (!op || !path || !action) return f;
    f.op = op;
    f.path = path;
    f.action = action;
    f.nth = nth ? std::atol(nth) : 1;
    if (const char* seconds = std::getenv("DDP_FAULT_SECONDS")) f.seconds = std::atol(seconds);
    f.err = f.action == "enospc" ? ENOSPC : f.action == "erofs" ? EROFS : f.action == "eio" ? EIO : 0;
    f.active = f.err != 0 || f.action == "kill" || f.action == "term" || f.action == "slow" || f.action == "count" ||
               (f.action == "stop" && f.op == "write");
    return f;
  }();
  return p;
}

std::atomic<long> matching_calls{0};

// Whether this call (op on `path`) is the planned fault: the nth matching one, or any later one for errno faults.
bool hit(const char* op, const std::string& path) {
  const FaultPlan& p = plan();
  if (!p.active || (p.op != "any" && p.op != op)) return false;
  const bool at_end = !p.path.empty() && p.path.back() == '$';  // "DIR$": the path ends there (the folder itself)
  const std::string wanted = at_end ? p.path.substr(0, p.path.size() - 1) : p.path;
  if (at_end ? path.size() < wanted.size() || path.compare(path.size() - wanted.size(), wanted.size(), wanted) != 0
             : path.find(wanted) == std::string::npos)
    return false;
  const long n = ++matching_calls;
  return p.action != "count" && (n == p.nth || (p.err != 0 && n > p.nth));
}

// With DDP_FAULT_ACTION = count, says how many calls matched when the process exits.
struct CountReport {
  ~CountReport() {
    if (plan().action == "count") std::fprintf(stderr, "fault shim: %ld matching calls\n", matching_calls.load());
  }
} count_report;

std::string fd_path(int fd) {
  char link[64], target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

[[noreturn]] void die() {
  ::raise(SIGKILL);
  std::abort();
}

int fail() {
  errno = plan().err;
  return -1;
}

// Whether the planned fault is a SIGTERM, which is sent here; the call then goes on as planned without a fault.
bool terminated() {
  if (plan().action != "term") return false;
  ::kill(::getpid(), SIGTERM);
  return true;
}

// A thread's name and scheduling policy, "name (SCHED_IDLE)", from its id (0: the calling thread).
std::string thread_text(pid_t tid) {
  char link[64], name[32] = "?";
  std::snprintf(link, sizeof link, "/proc/self/task/%d/comm", tid != 0 ? tid : static_cast<int>(::gettid()));
  if (FILE* f = std::fopen(link, "r")) {
    if (!std::fgets(name, sizeof name, f)) name[0] = 0;
    std::fclose(f);
    name[std::strcspn(name, "\n")] = 0;
  }
  const int policy = sched_getscheduler(tid);  // a thread's own (Linux)
  return std::string(name) + " (" +
         (policy == SCHED_IDLE    ? "SCHED_IDLE"
          : policy == SCHED_OTHER ? "SCHED_OTHER"
                                  : "another policy") +
         ")";
}

// Whether the planned fault is a slow call: the calling thread sleeps here, then the call goes on without a fault.
bool slowed(const char* op, const std::string& path) {
  if (plan().action != "slow") return false;
  std::string threads;
  if (DIR* tasks = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(tasks))
      if (e->d_name[0] != '.') threads += (threads.empty() ? "" : ", ") + thread_text(std::atoi(e->d_name));
    ::closedir(tasks);
  }
  std::fprintf(stderr, "fault shim: pid %d thread %s sleeps %ld s in a %s of %s; its threads: %s\n", ::getpid(),
               thread_text(0).c_str(), plan().seconds, op, path.c_str(), threads.c_str());
  ::sleep(static_cast<unsigned>(plan().seconds));
  return true;
}

// The planned fault, struck at the matching call: the errno (returning -1), or SIGKILL there.
int strike() {
  if (plan().err) return fail();
  die();
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t count) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (fd > 2 && plan().active && hit("write", fd_path(fd)) && !terminated() && !slowed("write", fd_path(fd))) {
    if (plan().err) return fail();
    const ssize_t half = real(fd, buf, count / 2);
    if (plan().action != "stop") die();
    const std::string where = fd_path(fd);
    std::fprintf(stderr, "fault shim: pid %d stops in a write of %s (%zd of %zu bytes written)\n", ::getpid(),
                 where.c_str(), half, count);
    // raise() signals this thread (tgkill), which then stops before its next instruction; kill() to the process
    // lets the kernel pick another thread to start the stop, and this one can finish the file meanwhile.
    ::raise(SIGSTOP);
    std::fprintf(stderr, "fault shim: pid %d continued\n", ::getpid());
    if (half < 0) return half;
    const ssize_t rest = real(fd, static_cast<const char*>(buf) + half, count - static_cast<size_t>(half));
    return rest < 0 ? rest : half + rest;
  }
  return real(fd, buf, count);
}

int fsync(int fd) {
  static auto real = next<int (*)(int)>("fsync");
  if (plan().active && hit("fsync", fd_path(fd)) && !terminated() && !slowed("fsync", fd_path(fd))) return strike();
  return real(fd);
}

int rename(const char* from, const char* to) {
  static auto real = next<int (*)(const char*, const char*)>("rename");
  const std::string names = std::string(from) + "\n" + to;
  if (plan().active && hit("rename", names) && !terminated() && !slowed("rename", names)) return strike();
  return real(from, to);
}

int unlink(const char* path) {
  static auto real = next<int (*)(const char*)>("unlink");
  if (plan().active && hit("unlink", path) && !terminated() && !slowed("unlink", path)) return strike();
  return real(path);
}

int remove(const char* path) {
  static auto real = next<int (*)(const char*)>("remove");
  if (plan().active && hit("unlink", path) && !terminated() && !slowed("unlink", path)) return strike();
  return real(path);
}

}  // extern "C"
