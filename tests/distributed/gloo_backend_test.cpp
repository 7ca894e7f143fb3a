// make_gloo_backend: every pair of ranks connected before the group is made, or with TORCH_GLOO_LAZY_INIT=1 (as
// torch.distributed reads it) each pair at its first message, the store's address exchange with it.
#include "distributed/process_group.h"

#include "tests/support/counting_store.h"

#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

namespace ddp::test {
namespace {

struct GlooRanks {
  std::vector<int64_t> requests_to_connect;  // each rank's store requests while its group was made
  std::vector<float> sums;                   // each rank's all-reduce of rank + 1, when asked for
};

// `world` ranks as threads over one HashStore, each making its Gloo group (loopback) through its own CountingStore;
// with `allreduce`, each then all-reduces one element holding rank + 1.
GlooRanks gloo_ranks(int world, bool allreduce) {
  auto shared = c10::make_intrusive<c10d::HashStore>();
  GlooRanks out;
  out.requests_to_connect.resize(static_cast<size_t>(world));
  out.sums.resize(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      auto store = c10::make_intrusive<CountingStore>(shared);
      auto gloo = make_gloo_backend(store, r, world, std::chrono::seconds(30), {"lo"});
      out.requests_to_connect[static_cast<size_t>(r)] = store->requests();
      if (!allreduce) return;
      std::vector<at::Tensor> t{at::full({1}, static_cast<float>(r + 1))};
      gloo->allreduce(t)->wait();
      out.sums[static_cast<size_t>(r)] = t[0].item<float>();
    });
  for (auto& t : threads) t.join();
  return out;
}

class GlooLazyInit : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("TORCH_GLOO_LAZY_INIT"); }
};

TEST_F(GlooLazyInit, WithoutItEveryPairIsConnectedBeforeTheGroupIsMade) {
  unsetenv("TORCH_GLOO_LAZY_INIT");
  constexpr int kWorld = 4;
  const GlooRanks ranks = gloo_ranks(kWorld, /*allreduce=*/false);
  // Each rank posts its addresses and reads every rank's (a wait and a get each).
  for (int r = 0; r < kWorld; ++r) EXPECT_GE(ranks.requests_to_connect[static_cast<size_t>(r)], 2 * (kWorld - 1));
}

TEST_F(GlooLazyInit, WithItNoPairIsConnectedUntilItsFirstMessage) {
  setenv("TORCH_GLOO_LAZY_INIT", "1", 1);
  constexpr int kWorld = 4;
  const GlooRanks ranks = gloo_ranks(kWorld, /*allreduce=*/true);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_LE(ranks.requests_to_connect[static_cast<size_t>(r)], 1) << "rank " << r;  // its own addresses only
    EXPECT_EQ(ranks.sums[static_cast<size_t>(r)], 10.0f) << "rank " << r;             // 1 + 2 + 3 + 4
  }
}

}  // namespace
}  // namespace ddp::test
