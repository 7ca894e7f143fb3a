// The hang roll-call: the verdict's wording over what ranks posted, and real jobs with a rank stopped (SIGSTOP) or
// blocked reading its data (a FIFO for an image): rank 0 names it, with the others' phase and collective count,
// within dist.hang_report_s + 10 s; the job then ends with no process left. A failed rank's error, posted through
// the store, ends the ranks waiting for it (ranks as threads over one HashStore).
#include "distributed/hang_watch.h"

#include "tests/launcher/launcher_test_support.h"
#include "tests/support/counting_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <filesystem>
#include <regex>

namespace ddp {
namespace {

// A rank's view on `host`, its pid in this process's pid namespace.
RankView view(const std::string& host, int64_t pid) {
  RankView v;
  v.host = host;
  v.pid = pid;
  v.pid_namespace = own_view(1, "").pid_namespace;
  return v;
}

HangReport report(int64_t rank, Phase phase, int64_t step, double seconds, uint64_t collectives, int64_t buckets = 0) {
  Activity::Snapshot s;
  s.step = step;
  s.phase = phase;
  s.seconds = seconds;
  s.collectives = collectives;
  s.buckets = buckets;
  return {rank, s, {}, {}};
}

TEST(HangVerdict, GroupsTheWaitingRanksAndNamesTheOthersWithHostAndPid) {
  const std::vector<RankView> views = {view("a", 10), view("a", 11), view("b", 12), view("b", 13), view("c", 14)};
  const std::vector<HangReport> reports = {
      report(0, Phase::kGradientAllReduce, 412, 61.2, 1650), report(2, Phase::kGradientAllReduce, 412, 60.7, 1650),
      report(3, Phase::kGradientAllReduce, 412, 61.0, 1650), report(1, Phase::kData, 412, 64.4, 1646)};
  const std::string v = hang_verdict(reports, 5, views, [](int64_t r) { return r == 4 ? "stopped" : ""; });
  EXPECT_EQ(v,
            "hang at step 412: ranks 0,2,3 wait in gradient all-reduce for 61 s (step 412, collectives started: "
            "1650); rank 1 (host a, pid 11) is in data for 64 s (step 412, collectives started: 1646); rank 4 (host "
            "c, pid 14) does not answer: stopped");
}

// Ranks in the gradient all-reduce started one collective per bucket, in bucket order: the one they wait for is the
// first that the rank furthest behind has not started. Here 5 buckets after collective 1645; rank 1 started 1646 and
// is still in backward, so the others wait for collective #1647, bucket 1. Without a rank behind (every other one
// silent) or without DDP's buckets, nothing is said of a bucket.
TEST(HangVerdict, NamesTheGradientBucketTheWaitingRanksWaitFor) {
  const std::vector<RankView> views = {view("a", 10), view("a", 11), view("b", 12)};
  const std::string v = hang_verdict(
      {report(0, Phase::kGradientAllReduce, 412, 61.2, 1650, 5),
       report(2, Phase::kGradientAllReduce, 412, 60.7, 1650, 5), report(1, Phase::kBackward, 412, 64.4, 1646, 5)},
      3, views, [](int64_t) { return ""; });
  EXPECT_EQ(v,
            "hang at step 412: ranks 0,2 wait in gradient all-reduce for 61 s (step 412, collectives started: 1650; "
            "waiting for collective #1647, gradient bucket 1 of 5); rank 1 (host a, pid 11) is in backward for 64 s "
            "(step 412, collectives started: 1646)");
  const std::string alone =
      hang_verdict({report(0, Phase::kGradientAllReduce, 412, 61.2, 1650, 5)}, 2, views, [](int64_t) { return ""; });
  EXPECT_EQ(alone.find("bucket"), std::string::npos) << alone;
  const std::string no_ddp =
      hang_verdict({report(0, Phase::kGradientAllReduce, 412, 61.2, 1650), report(1, Phase::kData, 412, 64.4, 1646)}, 2,
                   views, [](int64_t) { return ""; });
  EXPECT_EQ(no_ddp.find("bucket"), std::string::npos) << no_ddp;
}

TEST(HangVerdict, ReportTextRoundTripsAndRefusesGarbage) {
  Activity::Snapshot s;
  s.step = 7;
  s.phase = Phase::kCollective;
  s.seconds = 3.5;
  s.collectives = 99;
  s.buckets = 4;
  const auto back = parse_hang_report(3, hang_report_text(s, {"libc.so.6: read+0x10", "ddptrain+0x1234"}));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->activity.step, 7);
  EXPECT_EQ(back->activity.phase, Phase::kCollective);
  EXPECT_DOUBLE_EQ(back->activity.seconds, 3.5);
  EXPECT_EQ(back->activity.collectives, 99u);
  EXPECT_EQ(back->activity.buckets, 4);
  EXPECT_EQ(back->stack, (std::vector<std::string>{"libc.so.6: read+0x10", "ddptrain+0x1234"}));
  EXPECT_TRUE(back->other_threads.empty());
  // The other threads follow the training thread's frames, alike ones together.
  const std::vector<ThreadStacks> others = {{{12, 13}, {"gloo", "gloo"}, {"libc.so.6: epoll_wait+0x1"}},
                                            {{14}, {"ddptrain"}, {}}};
  const auto with = parse_hang_report(3, hang_report_text(s, {"ddptrain+0x1234"}, others));
  ASSERT_TRUE(with);
  EXPECT_EQ(with->stack, std::vector<std::string>{"ddptrain+0x1234"});
  EXPECT_EQ(with->other_threads,
            (std::vector<std::string>{"threads 12 (gloo), 13 (gloo):", "  libc.so.6: epoll_wait+0x1",
                                      "thread 14 (ddptrain): (no stack: did not answer)"}));
  EXPECT_FALSE(parse_hang_report(0, "7 99 1 1 0"));  // no such phase
  EXPECT_FALSE(parse_hang_report(0, "7 2 1 1 -1"));  // a negative bucket count
  EXPECT_FALSE(parse_hang_report(0, "seven"));
  // This process is running, on this host: nothing to say of it; a pid that is not there has exited.
  EXPECT_EQ(silent_rank_state(own_view(1, "")), "");
  EXPECT_EQ(silent_rank_state(view(own_view(1, "").host, 999999999)), "exited");
  // A pid of another pid namespace (another container, on this host or under this hostname) says nothing here.
  RankView elsewhere = view(own_view(1, "").host, 999999999);
  elsewhere.pid_namespace = "another boot pid:[4026531836]";
  EXPECT_EQ(silent_rank_state(elsewhere), "");
  // This process's pid, but a process started at another time: the rank that had the pid is gone.
  RankView reused = own_view(1, "");
  reused.start_time += 1;
  EXPECT_EQ(silent_rank_state(reused), "exited");
}

// The line a watch's `fail` got ("" until then).
class Ended {
 public:
  HangWatch::Say callback() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      line_ = line;
      cv_.notify_all();
    };
  }
  std::string within(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, d, [&] { return !line_.empty(); });
    return line_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string line_;
};

// A rank whose HangWatch runs, in `phase`; `ended` holds what the watch's `fail` got.
struct Watched {
  Watched(DistContext c, Phase phase)
      : ctx(std::move(c)),
        watch(HangWatch::start(
            ctx, /*report_after_s=*/1000.0, "", [](const std::string&) {}, ended.callback())) {
    ctx.activity->enter(phase);
  }
  DistContext ctx;
  Ended ended;
  std::unique_ptr<HangWatch> watch;
};

constexpr auto kPoll = std::chrono::milliseconds(500);  // the watch's poll at these worlds

// Ranks as threads over one HashStore, every client behind one Outage.
class RankFailure : public ::testing::Test {
 protected:
  // Rank `rank` of `world`: a process group without backends (the watch uses only the store); rank 0 serves the
  // store, as without a launcher.
  DistContext rank(int rank, int world) const {
    DistContext ctx;
    ctx.rank = rank;
    ctx.world_size = world;
    ctx.group = c10::make_intrusive<c10d::ProcessGroup>(shared_, rank, world);
    ctx.watch_store = c10::make_intrusive<test::CountingStore>(shared_, outage_);
    for (int r = 0; r < world; ++r) ctx.views.push_back(view("h" + std::to_string(r), 100 + r));
    ctx.serves_store = rank == 0;
    return ctx;
  }
  c10::intrusive_ptr<c10d::HashStore> shared_ = c10::make_intrusive<c10d::HashStore>();
  std::shared_ptr<test::Outage> outage_ = std::make_shared<test::Outage>();
};

TEST_F(RankFailure, ARankWaitingInACollectiveEndsNamingTheFailedRankAndItsError) {
  Watched waiting(rank(2, 3), Phase::kGradientAllReduce);
  tell_peers_of_failure(rank(1, 3), "rank 1: checkpoint write: No space left on device");
  EXPECT_EQ(waiting.ended.within(10 * kPoll),
            "rank 1 (host h1, pid 101) failed: rank 1: checkpoint write: No space left on device");
  // A second failure (a consequence of the first) does not replace the first one's line.
  tell_peers_of_failure(rank(0, 3), "rank 0: Connection reset by peer");
  Watched later(rank(2, 3), Phase::kCollective);
  EXPECT_NE(later.ended.within(10 * kPoll).find("rank 1 (host h1, pid 101) failed: "), std::string::npos);
}

// A rank writing a checkpoint when its peer fails finishes the write: it ends once it waits for its peers.
TEST_F(RankFailure, ARankWritingACheckpointEndsOnlyWhenItWaitsForItsPeers) {
  Watched writing(rank(0, 2), Phase::kCheckpoint);
  tell_peers_of_failure(rank(1, 2), "boom");
  EXPECT_EQ(writing.ended.within(4 * kPoll), "");
  writing.ctx.activity->enter(Phase::kLoop);
  EXPECT_EQ(writing.ended.within(4 * kPoll), "");
  writing.ctx.activity->enter(Phase::kCollective);
  EXPECT_EQ(writing.ended.within(10 * kPoll), "rank 1 (host h1, pid 101) failed: boom");
}

// A rank that has read a peer's failure but fails on its own within the poll that follows (both ended by one
// cause) says its own error: its watch is stopped first and ends nothing. The watch can end its rank no sooner than a
// poll after it read the failure; a round whose test thread stopped the watch later than 0.8 of a poll after the last
// moment it saw the failure unread (a thread stalled by a busy machine) proves nothing, and runs again over a store of
// its own.
TEST_F(RankFailure, ARankWhoseOwnErrorComesFirstIsNotEndedByThePeers) {
  constexpr int kRounds = 5;
  for (int round = 1;; ++round) {
    shared_ = c10::make_intrusive<c10d::HashStore>();
    Watched rank1(rank(1, 2), Phase::kCollective);
    std::thread failing([&] { tell_peers_of_failure(rank(0, 2), "boom"); });
    const auto until = std::chrono::steady_clock::now() + 10 * kPoll;
    auto unread_at = std::chrono::steady_clock::now();
    while (shared_->add("ddptrain/failed/count", 0) < 2 && std::chrono::steady_clock::now() < until) {
      unread_at = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const bool read = shared_->add("ddptrain/failed/count", 0) == 2;
    rank1.watch.reset();
    const auto stopped_after = std::chrono::steady_clock::now() - unread_at;
    failing.join();
    ASSERT_TRUE(read) << "rank 1 never read the failure";
    if (stopped_after < kPoll * 8 / 10) {
      EXPECT_EQ(rank1.ended.within(4 * kPoll), "");
      return;
    }
    ASSERT_LT(round, kRounds) << "the test thread stopped the watch only "
                              << std::chrono::duration<double>(stopped_after).count()
                              << " s after it saw the failure unread, in every round";
  }
}

// Rank 0's process serves the store: its failure would leave with it. It waits until the ranks have read it, so
// both end with its line although the store is gone just after it returns.
TEST_F(RankFailure, TheRankServingTheStoreWaitsUntilEveryRankHasReadItsFailure) {
  Watched rank1(rank(1, 3), Phase::kCollective), rank2(rank(2, 3), Phase::kGradientAllReduce);
  const auto start = std::chrono::steady_clock::now();
  tell_peers_of_failure(rank(0, 3), "the data directory is gone");
  const auto took = std::chrono::steady_clock::now() - start;
  outage_->set(test::Outage::State::kGone);
  EXPECT_LE(took, 2 * kPoll + std::chrono::seconds(2));
  EXPECT_EQ(rank1.ended.within(10 * kPoll), "rank 0 (host h0, pid 100) failed: the data directory is gone");
  EXPECT_EQ(rank2.ended.within(10 * kPoll), "rank 0 (host h0, pid 100) failed: the data directory is gone");
}

}  // namespace

namespace test {
namespace {

constexpr int kHangTimeoutS = 10;  // dist.timeout_s
constexpr int kReportS = 3;        // dist.hang_report_s

// Ranks started as torchrun would, each under `timeout` (a product that hangs fails the test instead of hanging it)
// and tagged so that the test can find and end them.
struct HangJob {
  TempDir dir;
  std::string tag = "DDPRUN_TEST_TAG=" + dir.path();
  ~HangJob() {
    for (int pid : processes_with_env(tag)) kill(pid, SIGKILL);  // only after a failed expectation
  }

  std::string start_ranks(int world, const std::string& args) const {
    const std::string port = std::to_string(free_port());
    std::string script;
    for (int r = 0; r < world; ++r)
      script += tag + " OMP_NUM_THREADS=1 timeout -s KILL 60 env RANK=" + std::to_string(r) +
                " LOCAL_RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) +
                " LOCAL_WORLD_SIZE=" + std::to_string(world) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " " +
                ddptrain_path() + " " + args + " --dist.timeout_s=" + std::to_string(kHangTimeoutS) +
                " --dist.hang_report_s=" + std::to_string(kReportS) + " > " +
                dir / ("rank" + std::to_string(r) + ".log") + " 2>&1 & p" + std::to_string(r) + "=$!\n";
    return script;
  }
  // Shell lines: the milliseconds from t0 until rank 0's log holds the verdict (or 60 s), `then`, and wait for every
  // rank.
  std::string time_verdict_then_wait(const std::string& then = "") const {
    return "for i in $(seq 1200); do grep -q 'warning: hang at step' " + dir / "rank0.log" +
           " && break; sleep 0.05; done\necho \"verdict_ms $(( ($(date +%s%N) - t0) / 1000000 ))\"\n" + then +
           "\nwait\n";
  }
  // Shell lines: wait for step `step` in metrics.jsonl, SIGSTOP rank `victim` (found by its environment, its pid in
  // $v), start t0.
  std::string stop_rank_at(int victim, int step) const {
    return "for i in $(seq 1200); do grep -q '\"step\":" + std::to_string(step) + ",' " + dir / "out/metrics.jsonl" +
           " 2>/dev/null && break; sleep 0.05; done\n"
           "v=; for d in /proc/[0-9]*; do [ \"$(cat $d/comm 2>/dev/null)\" = ddptrain ] || continue; "
           "e=$(tr '\\0' '\\n' < $d/environ 2>/dev/null); echo \"$e\" | grep -qx " +
           shell_quote(tag) + " && echo \"$e\" | grep -qx RANK=" + std::to_string(victim) +
           " && v=${d#/proc/}; done\n"
           "kill -STOP $v; t0=$(date +%s%N); echo \"stopped $v\"\n";
  }
  // Shell lines: once every rank but the stopped `victim` has ended, end it (as torchrun's agent ends a job's
  // remaining workers when one fails).
  std::string kill_stopped_rank_after_the_others(int world, int victim) const {
    std::string script;
    for (int r = 0; r < world; ++r)
      if (r != victim) script += "wait $p" + std::to_string(r) + "\n";
    return script + "kill -KILL $v";
  }
};

double verdict_seconds(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(verdict_ms (\d+))"))) return -1;
  return std::stod(m[1]) / 1000;
}

// The file the verdict names for the ranks' stacks.
std::string stacks_file(const std::string& verdict) {
  std::smatch m;
  return std::regex_search(verdict, m, std::regex(R"(\(each rank's stack: (\S+)\)$)")) ? m[1].str() : "";
}

std::string verdict_line(const std::string& log) {
  const size_t at = log.find("warning: hang at step");
  return at == std::string::npos ? "" : log.substr(at, log.find('\n', at) - at);
}

void expect_stopped_rank_named(int world, int victim) {
  HangJob job;
  const std::string cfg =
      write_tiny_job(job.dir, 1024, 32, 8,
                     {"job.out_dir=" + job.dir / "out", "data.batch_size=16", "training.epochs=1000",
                      "training.eval_every_epochs=0", "metrics.log_every_steps=1", "metrics.progress=plain"});
  const auto r = run_command(job.start_ranks(world, cfg) + job.stop_rank_at(victim, 3) +
                             job.time_verdict_then_wait(job.kill_stopped_rank_after_the_others(world, victim)));
  const std::string log = read_file(job.dir / "rank0.log");
  const std::string line = verdict_line(log);
  ASSERT_FALSE(line.empty()) << r.output << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(stopped (\d+))"))) << r.output;
  EXPECT_NE(line.find("rank " + std::to_string(victim) + " (host " + own_view(1, "").host + ", pid " + m[1].str() +
                      ") does not answer: stopped (SIGSTOP or a debugger)"),
            std::string::npos)
      << line;
  std::string others;
  for (int rank = 0; rank < world; ++rank)
    if (rank != victim) others += (others.empty() ? "" : ",") + std::to_string(rank);
  EXPECT_TRUE(std::regex_search(line, std::regex((world == 2 ? "rank " : "ranks ") + others +
                                                 R"( waits? in (gradient all-reduce|collective) for \d+ s \(step \d+, )"
                                                 R"(collectives started: [1-9]\d*\))")))
      << line;
  const double seconds = verdict_seconds(r.output);
  EXPECT_GT(seconds, kReportS - 1.0) << line;
  EXPECT_LT(seconds, kReportS + 10.0) << line;
  // Then the job ends as without the roll-call: the waiting ranks fail at dist.timeout_s, none is left.
  EXPECT_NE(log.find("error: "), std::string::npos) << log;
  EXPECT_TRUE(processes_with_env(job.tag).empty());
  // The ranks that answered posted their training thread's stack (the stopped one could not).
  const std::string stacks = read_file(stacks_file(line));
  for (int rank = 0; rank < world; ++rank)
    EXPECT_EQ(stacks.find("\nrank " + std::to_string(rank) + " (host") != std::string::npos, rank != victim)
        << rank << "\n"
        << stacks;
  // Each answering rank's training thread answered; of its other threads some may not within their time on a loaded
  // machine, but the gloo loop threads, idle, do.
  EXPECT_EQ(stacks.find("(no stack: the training thread did not answer)"), std::string::npos) << stacks;
  EXPECT_TRUE(std::regex_search(stacks, std::regex(R"(\(pt_gloo_runloop\):\n +\S)"))) << stacks;
}

TEST(HangRollCall, StoppedRankOfTwoIsNamedWithTheOthersPhaseAndCollectiveCount) { expect_stopped_rank_named(2, 1); }

TEST(HangRollCall, StoppedRankOfFourIsNamedWithTheOthersPhaseAndCollectiveCount) { expect_stopped_rank_named(4, 2); }

// An image that is a FIFO nobody writes: the rank whose batch holds it blocks opening it, in the data phase.
TEST(HangRollCall, RankBlockedReadingItsDataIsNamedInPhaseData) {
  if (!python_has_modules("torch, torchvision, PIL")) GTEST_SKIP() << python() << " does not have torchvision, PIL";
  HangJob job;
  const auto made = run_command(python() + " " + source_dir() + "/tests/python/image_folder_reference.py make " +
                                job.dir / "f" + " --classes 2 --train 16 --val 1 --seed 3 --min-side 20 --max-side 24");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::string fifo;
  for (const auto& e : std::filesystem::recursive_directory_iterator(job.dir / "f/train"))
    if (e.is_regular_file()) fifo = e.path().string();
  ASSERT_FALSE(fifo.empty());
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string cfg =
      write_mnist_job(job.dir, job.dir / "f",
                      {"data.batch_size=2", "data.image_size=16", "data.resize_size=16", "model.name=resnet18",
                       "job.out_dir=" + job.dir / "out", "training.epochs=1000", "training.eval_every_epochs=0",
                       "metrics.progress=plain"});
  // Once the verdict is out, the FIFO opens and ends empty: the blocked rank fails on it instead of waiting for ever.
  const auto r = run_command(job.start_ranks(2, cfg + " --data.dataset=image_folder") + "t0=$(date +%s%N)\n" +
                             job.time_verdict_then_wait(": > " + shell_quote(fifo)));
  const std::string line = verdict_line(read_file(job.dir / "rank0.log"));
  ASSERT_FALSE(line.empty()) << r.output << read_file(job.dir / "rank0.log") << read_file(job.dir / "rank1.log");
  // Waiting in the gradient all-reduce, the other rank waits for bucket 0: the data rank started none of this step's.
  EXPECT_TRUE(std::regex_search(
      line, std::regex(R"(rank [01] waits in (gradient all-reduce for \d+ s \(step \d+, collectives started: \d+; )"
                       R"(waiting for collective #\d+, gradient bucket 0 of \d+\)|collective for \d+ s \(step \d+, )"
                       R"(collectives started: \d+\)); rank [01] \(host [^,]+, pid \d+\) is in data for \d+ s )")))
      << line;
  EXPECT_TRUE(processes_with_env(job.tag).empty());
  // Both answered: each training thread's stack, the data rank's waiting for its batch.
  const std::string stacks = read_file(stacks_file(line));
  EXPECT_NE(stacks.find("\nrank 0 (host"), std::string::npos) << stacks;
  EXPECT_NE(stacks.find("\nrank 1 (host"), std::string::npos) << stacks;
  EXPECT_NE(stacks.find(", in data:\n  "), std::string::npos) << stacks;
  // And its other threads: the decode worker blocked opening the FIFO, by its name.
  EXPECT_TRUE(std::regex_search(stacks, std::regex(R"(ddp-data-\d+\):\n(?:      [^\n]*\n)*?      [^\n]*open)")))
      << stacks;
  EXPECT_EQ(stacks.find("(no stack"), std::string::npos) << stacks;
}

}  // namespace
}  // namespace test
}  // namespace ddp
