// post_notice and read_notice: the first notice stays, a waiting poster returns once every rank is counted, and
// by its deadline (a second and two of the readers' polls) whatever the store does.
#include "distributed/store_notice.h"

#include "tests/support/counting_store.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <thread>

namespace ddp::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(StoreNotice, TheFirstNoticeStays) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  post_notice(store, "k", "rank 1: disk full", 3, false, 100ms);
  post_notice(store, "k", "rank 2: Connection reset by peer", 3, false, 100ms);
  EXPECT_EQ(read_notice(*store, "k"), "rank 1: disk full");
}

// World 3: the poster and two readers. The poster returns once both have read, long before its deadline; with one
// reader missing, at its deadline.
TEST(StoreNotice, AWaitingPosterReturnsOnceEveryRankHasRead) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::thread readers([store] {
    std::this_thread::sleep_for(200ms);
    for (int r = 0; r < 2; ++r) {
      store->wait({"k"});
      read_notice(*store, "k");
    }
  });
  auto start = Clock::now();
  post_notice(store, "k", "boom", 3, true, 9500ms);  // gives up at 20 s
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_GE(Clock::now() - start, 150ms);
  readers.join();

  auto alone = c10::make_intrusive<c10d::HashStore>();
  start = Clock::now();
  post_notice(alone, "k", "boom", 3, true, 0ms);  // gives up at 1 s
  EXPECT_GE(Clock::now() - start, 1s);
  EXPECT_EQ(read_notice(*alone, "k"), "boom");
}

// A store behind a silent link answers nothing: the poster returns at its deadline all the same; one that is gone
// ends it at once, and a reader then throws.
TEST(StoreNotice, AStoreThatDoesNotAnswerHoldsThePosterNoLongerThanItsDeadline) {
  auto outage = std::make_shared<Outage>();
  auto store = c10::make_intrusive<CountingStore>(c10::make_intrusive<c10d::HashStore>(), outage);
  outage->set(Outage::State::kSilent);
  auto start = Clock::now();
  post_notice(store, "k", "boom", 2, true, 0ms);  // gives up at 1 s
  EXPECT_LT(Clock::now() - start, 5s);
  outage->set(Outage::State::kGone);  // the request left waiting ends too
  start = Clock::now();
  post_notice(store, "k", "boom", 2, true, 9500ms);  // gives up at 20 s
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_THROW(read_notice(*store, "k"), std::exception);
}

}  // namespace
}  // namespace ddp::test
