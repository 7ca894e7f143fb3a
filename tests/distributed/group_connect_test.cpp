// connect_backend: a failure is posted for the other ranks with a Gloo hint; peers and the deadline end the process.
#include "distributed/group_connect.h"

#include "tests/support/counting_store.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <thread>

namespace ddp::test {
namespace {

using Group = c10::intrusive_ptr<c10d::Backend>;
using namespace std::chrono_literals;

const char* kRefused = "[./gloo/transport/tcp/pair.cc:799] connect [127.0.0.1]:20912: Connection refused";

// Rank `rank` of `world` watching through `store`; rank 0 serves it.
ConnectWatch watch_of(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world = 8,
                      const std::string& address = "h:1") {
  ConnectWatch w;
  w.store = std::move(store);
  w.rank = rank;
  w.world_size = world;
  w.serves_store = rank == 0;
  w.store_address = address;
  return w;
}

// A client of a store whose server has gone: every call throws, as a TCPStore client's do once rank 0 exits.
c10::intrusive_ptr<c10d::Store> gone_store() {
  auto outage = std::make_shared<Outage>();
  outage->set(Outage::State::kGone);
  return c10::make_intrusive<CountingStore>(c10::make_intrusive<c10d::HashStore>(), outage);
}

Group never_connects() {
  std::this_thread::sleep_for(60s);
  return {};
}

TEST(GroupConnect, GlooConnectErrorsGetAHint) {
  EXPECT_NE(gloo_connect_hint(kRefused).find("loopback"), std::string::npos);
  EXPECT_NE(gloo_connect_hint(kRefused).find("GLOO_SOCKET_IFNAME"), std::string::npos);
  const std::string remote = gloo_connect_hint("[pair.h:324] Connect timeout [10.1.2.3]:4000");
  EXPECT_EQ(remote.find("loopback"), std::string::npos);
  EXPECT_NE(remote.find("GLOO_SOCKET_IFNAME"), std::string::npos);
  EXPECT_NE(gloo_connect_hint("connect [10.1.2.3]:4000: No route to host"), "");
  EXPECT_EQ(gloo_connect_hint("Timed out waiting 5000ms for recv operation to complete"), "");
  EXPECT_EQ(gloo_connect_hint("some other failure"), "");
}

TEST(GroupConnect, FailurePostsTheErrorAndThrowsItWithTheHint) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  try {
    connect_backend([]() -> Group { throw std::runtime_error(std::string(kRefused) + "\nbacktrace..."); },
                    watch_of(store, 1), 10s);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(std::string("rank 1: could not connect the process group: ") + kRefused, 0), 0u) << what;
    EXPECT_NE(what.find("GLOO_SOCKET_IFNAME"), std::string::npos) << what;
    EXPECT_EQ(what.find("backtrace"), std::string::npos) << what;
  }
  const auto posted = store->get("ddptrain/connect_failed");
  EXPECT_EQ(std::string(posted.begin(), posted.end()), std::string("rank 1: ") + kRefused);
}

TEST(GroupConnect, SuccessReturnsTheGroupAndPostsNothing) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  EXPECT_FALSE(connect_backend([] { return Group(); }, watch_of(store, 0), 10s));
  EXPECT_FALSE(store->check({"ddptrain/connect_failed"}));
}

class GroupConnectDeath : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(GroupConnectDeath, AnotherRanksFailureEndsThisRankAtOnce) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::string posted = std::string("rank 0: ") + kRefused;
  store->set("ddptrain/connect_failed", std::vector<uint8_t>(posted.begin(), posted.end()));
  EXPECT_EXIT(connect_backend(never_connects, watch_of(store, 3), 30s), ::testing::ExitedWithCode(1),
              "\\[rank 3\\] error: the process group failed to connect on another rank: rank 0: .*Connection refused");
}

// Rank 0 serves the store and fails to connect; rank 1's watchdog is slow to look (its first request answered only
// after 600 ms: a loaded machine). Rank 0 waits until rank 1 has read its error before it returns, and the store goes
// with it: rank 1 still says rank 0's error, not that it lost the store.
TEST_F(GroupConnectDeath, ARankServingTheStoreKeepsItUntilTheOthersHaveReadItsError) {
  EXPECT_EXIT(
      {
        auto shared = c10::make_intrusive<c10d::HashStore>();
        auto slow = std::make_shared<Outage>();
        slow->set(Outage::State::kSilent);
        std::thread([slow] {
          std::this_thread::sleep_for(600ms);
          slow->set(Outage::State::kUp);
        }).detach();
        std::thread([shared, slow] {
          try {
            connect_backend([]() -> Group { throw std::runtime_error(kRefused); }, watch_of(shared, 0, 2), 30s);
          } catch (const std::exception&) {
            slow->set(Outage::State::kGone);  // rank 0's process, and the store with it, ends here
          }
        }).detach();
        connect_backend(never_connects, watch_of(c10::make_intrusive<CountingStore>(shared, slow), 1, 2), 30s);
      },
      ::testing::ExitedWithCode(1),
      "\\[rank 1\\] error: the process group failed to connect on another rank: rank 0: .*Connection refused");
}

TEST_F(GroupConnectDeath, LosingTheStoreEndsThisRank) {
  EXPECT_EXIT(connect_backend(never_connects, watch_of(gone_store(), 4, 8, "10.0.0.1:29500"), 30s),
              ::testing::ExitedWithCode(1),
              "\\[rank 4\\] error: lost the store at 10.0.0.1:29500 while the process group was connecting");
}

TEST_F(GroupConnectDeath, TheDeadlineEndsTheWait) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EXIT(connect_backend(never_connects, watch_of(c10::intrusive_ptr<c10d::Store>(), 2), 500ms),
              ::testing::ExitedWithCode(1),
              "\\[rank 2\\] error: the process group did not connect within dist.timeout_s = 0.5 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

}  // namespace
}  // namespace ddp::test
