// Rank views at rendezvous: a differing WORLD_SIZE/config is one line naming both ranks, a rank that never joins is
// named by every peer, a rank gone during start-up is named (number, host, pid) instead of a Gloo address.
#include "distributed/rank_views.h"

#include "tests/support/counting_store.h"
#include "tests/support/test_support.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace ddp::test {
namespace {

std::string views_host() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

TEST(RankViews, TextRoundTripsAndMalformedViewsAreRefused) {
  RankView v = own_view(4, "abc");
  RankView back;
  ASSERT_TRUE(parse_view(view_text(v), back));
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.config, "abc");
  EXPECT_EQ(back.host, views_host());
  EXPECT_EQ(back.pid, getpid());
  EXPECT_FALSE(back.pid_namespace.empty());
  EXPECT_EQ(back.pid_namespace, v.pid_namespace);
  EXPECT_GT(back.start_time, 0u);
  EXPECT_EQ(back.start_time, v.start_time);
  EXPECT_TRUE(pid_visible(back));
  EXPECT_TRUE(rank_process_alive(back));
  EXPECT_FALSE(parse_view("world=4", back));
  EXPECT_FALSE(parse_view("world=x\nlibtorch=1\nconfig=c\nhost=h\npid=1", back));
  EXPECT_FALSE(parse_view(std::string(5000, 'a'), back));
}

// gone_ranks names a rank whose process this one sees exited, and never one of another pid namespace, whatever its
// hostname: there its pid may be no process here, or another one.
TEST(RankViews, GoneRanksAreThoseSeenGoneInThisPidNamespace) {
  std::vector<RankView> views = {own_view(3, ""), own_view(3, ""), own_view(3, "")};
  views[1].pid = 999999999;
  views[2].pid = 999999998;
  views[2].pid_namespace = "another boot pid:[4026531836]";
  EXPECT_EQ(gone_ranks(views, 0, std::chrono::milliseconds(0)),
            "rank 1 (host " + views_host() + ", pid 999999999) exited");
  views[1].pid_namespace = views[2].pid_namespace;
  EXPECT_EQ(gone_ranks(views, 0, std::chrono::milliseconds(0)), "");
}

TEST(RankViews, MismatchNamesBothRanksAndHosts) {
  RankView a = own_view(2, "c1"), b = own_view(3, "c1");
  a.host = "node-a";
  b.host = "node-b";
  EXPECT_EQ(view_mismatch(0, a, 1, b),
            "WORLD_SIZE differs between ranks: 2 on rank 0 (host node-a), 3 on rank 1 (host node-b) (every rank must be "
            "started with the same WORLD_SIZE)");
  b.world_size = 2;
  EXPECT_EQ(view_mismatch(0, a, 1, b), "");
  b.config = "c2";
  EXPECT_EQ(view_mismatch(0, a, 5, b),
            "the config differs between ranks: digest c1 on rank 0 (host node-a), digest c2 on rank 5 (host node-b) "
            "(every rank must get the same config file and --section.key overrides)");
  b.config = "c1";
  b.libtorch = "2.10.0";
  EXPECT_NE(view_mismatch(0, a, 1, b).find("LibTorch differs between ranks: "), std::string::npos);
}

struct ThreadJoin {
  std::vector<RankView> views;
  std::string error;
  int64_t requests = 0;
};

// Where a join departs from the plain one: rank 0's process serves the store, which goes when rank 0's join ends;
// one thread reads the verdict late.
struct JoinSetting {
  bool store_goes_with_rank0 = false;
  size_t slow_reader = SIZE_MAX;  // the thread's index
  std::chrono::milliseconds read_delay{0};
};

// One thread per entry of `ranks` (its RANK, of a world of `world`), all over one HashStore, each through its own
// CountingStore; thread i starts i * stagger after the first and publishes a view with pid 1000 + i.
std::vector<ThreadJoin> join_threads(int64_t world, const std::vector<int64_t>& ranks,
                                     std::chrono::milliseconds stagger,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                     const std::function<void(c10d::Store&)>& before = {},
                                     const JoinSetting& setting = {}) {
  auto shared = c10::make_intrusive<c10d::HashStore>();
  auto outage = std::make_shared<Outage>();
  if (before) before(*shared);
  std::vector<ThreadJoin> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      std::this_thread::sleep_for(stagger * static_cast<int64_t>(i));
      auto store = c10::make_intrusive<CountingStore>(shared, outage);
      if (i == setting.slow_reader) store->delay_reads_of("ddptrain/verdict", setting.read_delay);
      JoinPlace place;
      place.rank = ranks[i];
      place.world_size = world;
      place.local_world_size = 4;
      place.address = "127.0.0.1:29500";
      place.serves_store = setting.store_goes_with_rank0 && ranks[i] == 0;
      RankView mine = own_view(world, "digest");
      mine.pid = 1000 + static_cast<int64_t>(i);
      ThreadJoin& j = out[i];
      try {
        j.views = join_ranks(store, place, mine, timeout);
      } catch (const std::exception& e) {
        j.error = e.what();
      }
      j.requests = store->requests();
      if (place.serves_store) outage->set(Outage::State::kGone);
    });
  for (auto& t : threads) t.join();
  return out;
}

// A job of many ranks must not have each rank poll for every other's key: a rank other than 0 makes the same few
// requests whatever the world, and rank 0 reads each arrival once (plus a count and a check a poll). Every rank ends
// with the views of every rank, in rank order.
TEST(RankViews, JoinTakesAFewStoreRequestsPerRankWhateverTheWorld) {
  constexpr int64_t kWorld = 48;
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < kWorld; ++r) ranks.push_back(r);
  const auto start = std::chrono::steady_clock::now();
  const auto joins = join_threads(kWorld, ranks, std::chrono::milliseconds(5));
  const double polls = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 0.02 + 2;
  for (int64_t r = 0; r < kWorld; ++r) {
    const ThreadJoin& j = joins[static_cast<size_t>(r)];
    ASSERT_EQ(j.error, "") << "rank " << r;
    ASSERT_EQ(static_cast<int64_t>(j.views.size()), kWorld) << "rank " << r;
    for (int64_t k = 0; k < kWorld; ++k) {
      EXPECT_EQ(j.views[static_cast<size_t>(k)].pid, 1000 + k) << "rank " << r << ", view of rank " << k;
    }
    if (r > 0) {
      EXPECT_LE(j.requests, 6) << "rank " << r;
    }
  }
  // Rank 0: its view, each arrival's check and read, a count and a check a poll, the verdict.
  EXPECT_LE(joins[0].requests, 2 + 2 * (kWorld - 1) + 2 * polls) << polls << " polls";
}

// Two processes started with one RANK (threads 1 and 2 as rank 1 of 3, after rank 0), as each of the three names them.
void expect_two_processes_of_rank_one_named(const std::vector<ThreadJoin>& joins) {
  const std::string host = own_view(3, "").host;
  const std::string line = "two processes joined as rank 1: host " + host + ", pid 1001 and host " + host +
                           ", pid 1002 (every process of the job needs its own RANK)";
  EXPECT_EQ(joins[0].error, "rank 0: " + line);
  EXPECT_EQ(joins[1].error, "rank 1: rank 0 found: " + line);
  EXPECT_EQ(joins[2].error, "rank 1: rank 0 found: " + line);
}

// Two processes started with one RANK are named, with where each runs, by every rank.
TEST(RankViews, TwoProcessesOfOneRankAreNamedByEveryRank) {
  expect_two_processes_of_rank_one_named(
      join_threads(3, {0, 1, 1}, std::chrono::milliseconds(50), std::chrono::seconds(10)));
}

// Where rank 0's process serves the store, its exit after a failed join takes the store along: the ranks counted in
// read its verdict first, so that one slow to read it still names the culprit instead of a lost store.
TEST(RankViews, ARankSlowToReadRankZerosVerdictStillNamesTheCulprit) {
  JoinSetting setting;
  setting.store_goes_with_rank0 = true;
  setting.slow_reader = 2;
  setting.read_delay = std::chrono::milliseconds(600);
  expect_two_processes_of_rank_one_named(
      join_threads(3, {0, 1, 1}, std::chrono::milliseconds(50), std::chrono::seconds(10), {}, setting));
}

// A rank that dies after it was counted in and before it recorded its arrival holds up none of the ranks after it:
// rank 0 names it alone.
TEST(RankViews, ARankGoneBetweenItsCountAndItsArrivalIsTheOneNamed) {
  const auto joins = join_threads(3, {0, 2}, std::chrono::milliseconds(100), std::chrono::seconds(1),
                                  [](c10d::Store& store) { store.add("ddptrain/arrivals", 1); });  // rank 1, gone
  EXPECT_EQ(joins[0].error,
            "rank 0: timed out after 1 s waiting for rank(s) 1 of 3 to join the store at 127.0.0.1:29500 "
            "(dist.timeout_s)");
  EXPECT_EQ(joins[1].error,
            "rank 2: rank 0 found: timed out after 1 s waiting for rank(s) 1 of 3 to join the store at "
            "127.0.0.1:29500 (dist.timeout_s)");
}

// Without rank 0 (its store reached, its process not there) the others name it after their timeout.
TEST(RankViews, RanksWithoutRankZeroNameItAfterTheirTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto joins = join_threads(3, {1, 2}, std::chrono::milliseconds(0), std::chrono::seconds(1));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(joins[0].error,
            "rank 1: timed out after 1 s waiting for rank(s) 0 of 3 to join the store at 127.0.0.1:29500 "
            "(dist.timeout_s)");
  EXPECT_NE(joins[1].error.find("rank 2: timed out after 1 s waiting for rank(s) 0 of 3 to join"), std::string::npos)
      << joins[1].error;
  EXPECT_LT(secs, 10.0);
}

std::string views_job(const TempDir& dir) {
  return write_tiny_job(dir, 64, 16, 1, {"data.batch_size=8", "dist.timeout_s=3.0", "metrics.progress=off"});
}

// Rank 1 in the background (output in dir/rank1.log), rank 0 in the foreground; both bounded by 30 s.
std::pair<CommandResult, std::string> views_two_ranks(const TempDir& dir, const std::string& rank0,
                                                      const std::string& rank1) {
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " OMP_NUM_THREADS=1 ";
  auto r = run_command("(" + env + rank1 + " > " + dir / "rank1.log" + " 2>&1 &) ; " + env + rank0 + "; rc=$?; " +
                       "sleep 0.5; exit $rc");
  return {r, read_file(dir / "rank1.log")};
}

// A WORLD_SIZE that differs across ranks is reported as such, not left to time out or hang.
TEST(RankViews, DifferingWorldSizeIsOneLineNamingTheRanks) {
  TempDir dir;
  const std::string cfg = views_job(dir);
  const auto start = std::chrono::steady_clock::now();
  auto [r0, r1] = views_two_ranks(dir, "RANK=0 WORLD_SIZE=2 timeout -s KILL 30 " + ddptrain_path() + " " + cfg,
                                  "RANK=1 WORLD_SIZE=3 timeout -s KILL 30 " + ddptrain_path() + " " + cfg);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string line = "WORLD_SIZE differs between ranks: 2 on rank 0 (host " + views_host() + "), 3 on rank 1 (host " +
                           views_host() + ") (every rank must be started with the same WORLD_SIZE)\n";
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  EXPECT_EQ(r0.output, "[rank 0] error: rank 0: " + line);
  EXPECT_NE(r1.find("error: rank 1: "), std::string::npos) << r1;
  EXPECT_NE(r1.find(line), std::string::npos) << r1;
  EXPECT_LT(secs, 3.0 + 10.0);
}

TEST(RankViews, DifferingConfigIsOneLineNamingTheRanks) {
  TempDir dir;
  const std::string cfg = views_job(dir);
  auto [r0, r1] = views_two_ranks(dir, "RANK=0 WORLD_SIZE=2 timeout -s KILL 30 " + ddptrain_path() + " " + cfg,
                                  "RANK=1 WORLD_SIZE=2 timeout -s KILL 30 " + ddptrain_path() + " " + cfg +
                                      " --optimizer.lr=0.5");
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  EXPECT_EQ(r0.output.rfind("[rank 0] error: rank 0: the config differs between ranks: digest ", 0), 0u) << r0.output;
  EXPECT_NE(r0.output.find(" on rank 0 (host " + views_host() + "), digest "), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find(" on rank 1 (host " + views_host() + ") (every rank must get the same config file"),
            std::string::npos)
      << r0.output;
  EXPECT_EQ(std::count(r0.output.begin(), r0.output.end(), '\n'), 1) << r0.output;
  EXPECT_NE(r1.find("the config differs between ranks"), std::string::npos) << r1;
}

// A rank that never joins is named by every peer, not only by rank 0 (whose exit takes the store along, which must
// not leave the others with a bare "Broken pipe").
TEST(RankViews, ARankThatNeverJoinsIsNamedByEveryPeer) {
  TempDir dir;
  const std::string cfg = views_job(dir);
  auto [r0, r1] = views_two_ranks(dir, "RANK=0 WORLD_SIZE=3 timeout -s KILL 30 " + ddptrain_path() + " " + cfg,
                                  "RANK=1 WORLD_SIZE=3 timeout -s KILL 30 " + ddptrain_path() + " " + cfg);
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  EXPECT_NE(r0.output.find("waiting for rank(s) 2 of 3 to join"), std::string::npos) << r0.output;
  EXPECT_NE(r1.find("[rank 1] error: rank 1: rank 0 found: timed out after 3 s waiting for rank(s) 2 of 3 to join"),
            std::string::npos)
      << r1;
  EXPECT_EQ(r1.find("Broken pipe"), std::string::npos) << r1;
}

// A missing rank's node is named as torchrun numbers nodes (rank / LOCAL_WORLD_SIZE) only where every node runs as many
// ranks as far as GROUP_WORLD_SIZE tells: nodes of 1 and 2 ranks (rank 2 on node 1) name no node, where rank / 1 would
// name a node 2 that is not there.
TEST(RankViews, AMissingRanksNodeIsNamedOnlyWhenEveryNodeRunsAsManyRanks) {
  TempDir dir;
  const std::string cfg = views_job(dir);
  auto rank = [&](int r, int local_world_size, int nodes) {
    return "RANK=" + std::to_string(r) + " WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=" +
           std::to_string(local_world_size) + " GROUP_RANK=" + std::to_string(r) +
           " GROUP_WORLD_SIZE=" + std::to_string(nodes) + " timeout -s KILL 30 " + ddptrain_path() + " " + cfg;
  };
  auto [alike, alike1] = views_two_ranks(dir, rank(0, 1, 3), rank(1, 1, 3));
  EXPECT_NE(alike.output.find("waiting for rank(s) 2 (node 2) of 3 to join"), std::string::npos) << alike.output;
  auto [mixed, mixed1] = views_two_ranks(dir, rank(0, 1, 2), rank(1, 2, 2));
  EXPECT_NE(mixed.output.find("waiting for rank(s) 2 of 3 to join"), std::string::npos) << mixed.output;
}

// Waits (up to 30 s) until rank 1's view is in the store rank 0 serves at `port`: rank 1 has joined.
bool rank1_joined(int port) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = false;
  o.waitWorkers = false;
  o.timeout = std::chrono::seconds(30);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  try {
    c10d::TCPStore store("127.0.0.1", o);  // connecting retries until rank 0's server listens
    while (std::chrono::steady_clock::now() < give_up) {
      if (store.check({"ddptrain/view/1"})) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const std::exception&) {
  }
  return false;
}

// A rank dying during start-up is named by the survivors (not a Gloo line naming no rank). Rank 1 is killed (-9)
// at several points after it joined; rank 0's one error line names it by number, host and pid.
TEST(RankViews, ARankKilledDuringStartUpIsNamedBySurvivors) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 2000, 16, 1);
  const std::string cfg = write_mnist_job(dir, dir / "data",
                                          {"data.batch_size=8", "training.epochs=20", "dist.timeout_s=20.0",
                                           "dist.allreduce=gloo", "metrics.progress=off"});
  // Rank 1 is killed `delay` seconds after its view reached rank 0's store, i.e. while the ranks join, connect Gloo,
  // or broadcast the initial weights. The shell kills it once the file `kill_now` appears.
  for (const double delay : {0.0, 0.3}) {
    const int port = free_port();
    const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                            " OMP_NUM_THREADS=1 ";
    const std::string kill_now = dir / "kill_now";
    std::filesystem::remove(kill_now);
    const auto start = std::chrono::steady_clock::now();
    auto ranks = std::async(std::launch::async, [&] {
      return run_command("RANK=0 " + env + "timeout -s KILL 40 " + ddptrain_path() + " " + cfg + " & r0=$!; RANK=1 " +
                         env + ddptrain_path() + " " + cfg + " >/dev/null 2>&1 & r1=$!; for i in $(seq 4000); do " +
                         "[ -e " + kill_now + " ] && break; sleep 0.01; done; kill -9 $r1; wait $r0");
    });
    const bool joined = rank1_joined(port);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    write_file(kill_now, "");
    const CommandResult r = ranks.get();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(joined) << "delay " << delay << ": rank 1 never joined: " << r.output;
    EXPECT_EQ(r.exit_code, 1) << "delay " << delay << ": " << r.output;
    EXPECT_NE(r.output.find("rank 1 (host " + views_host() + ", pid "), std::string::npos)
        << "delay " << delay << ": " << r.output;
    EXPECT_NE(r.output.find(") exited"), std::string::npos) << "delay " << delay << ": " << r.output;
    EXPECT_LT(secs, 10.0) << "delay " << delay << ": " << r.output;
  }
}

}  // namespace
}  // namespace ddp::test
