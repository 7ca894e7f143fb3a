// Tests: stacks_of_other_threads asks every other thread of the process for its stack, groups the threads whose
// frames are the same and names each thread; the watched thread and the caller are left out.
#include "distributed/thread_stack.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace ddp {
namespace {

TEST(ThreadStack, OtherThreadsAreGroupedByTheirFramesAndNamed) {
  watch_this_thread();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::atomic<int> ready{0};
  std::vector<std::atomic<pid_t>> tids(2);
  std::vector<std::thread> parked;
  for (int i = 0; i < 2; ++i)
    parked.emplace_back([&, i] {
      pthread_setname_np(pthread_self(), "ddp-parked");
      tids[static_cast<size_t>(i)] = static_cast<pid_t>(syscall(SYS_gettid));
      ++ready;
      char byte = 0;
      while (read(fds[0], &byte, 1) < 0) {  // blocks until the test writes; a signal restarts it (SA_RESTART)
      }
    });
  while (ready < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both inside read()

  const std::vector<ThreadStacks> stacks = stacks_of_other_threads(std::chrono::milliseconds(500), 16);
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  const ThreadStacks* both = nullptr;
  for (const auto& group : stacks) {
    EXPECT_EQ(group.tids.size(), group.names.size());
    EXPECT_EQ(std::count(group.tids.begin(), group.tids.end(), self), 0);  // neither the caller nor the watched one
    if (std::count(group.tids.begin(), group.tids.end(), tids[0].load())) both = &group;
  }
  ASSERT_NE(both, nullptr);
  EXPECT_EQ(both->tids,
            (std::vector<pid_t>{std::min(tids[0].load(), tids[1].load()), std::max(tids[0].load(), tids[1].load())}));
  EXPECT_EQ(both->names, (std::vector<std::string>{"ddp-parked", "ddp-parked"}));
  EXPECT_FALSE(both->frames.empty());
  EXPECT_LE(stacks_of_other_threads(std::chrono::milliseconds(100), 1).size(), 1u);  // max_stacks

  ASSERT_EQ(write(fds[1], "xy", 2), 2);
  for (auto& t : parked) t.join();
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace ddp
