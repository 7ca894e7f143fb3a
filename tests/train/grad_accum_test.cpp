// Gradient accumulation: K micro-batches per step equal one K-times-larger batch.
//
// On 1 and 2 ranks, including a partial last group; exactly one all-reduce round per optimizer step (counted
// through the process group).
#include "train/trainer.h"
#include "distributed/ddp.h"
#include "optim/gradients.h"
#include "data/distributed_sampler.h"
#include "distributed/rendezvous.h"
#include "distributed/process_group.h"
#include "tests/support/counting_backend.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <thread>

namespace ddp::test {
namespace {

std::string accum_config(const TempDir& dir) {
  return write_mnist_job(dir, dir / "data",
                         {"job.seed=7", "model.name=net", "model.dropout=0.0", "optimizer.lr=0.05",
                          "optimizer.momentum=0.9", "metrics.log_every_steps=100"});
}

CommandResult train_one(const std::string& cfg, const std::string& args) {
  return run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " " + args);
}

// Why 1e-5 after 8 steps (lr 0.05, momentum 0.9, one intra-op thread on both sides): accumulation regroups each
// gradient entry's float32 sum over the 64 samples (4 partial means of 16, each scaled by 1/4, against one mean of
// 64) and changes nothing else, so each step's gradients differ by rounding alone: a few units of u = 2^-24 = 6e-8 of
// an entry (the Net's entries stay below 1 here). The steps after carry such a difference on and can grow it
// (momentum 0.9 passes it on up to 10 times; the next gradients respond to the changed weights), which the measured
// ends include: 4.5e-8 after 8 steps on AVX2 and on the plain path, 200x under the bound. A micro-batch dropped, or
// summed instead of averaged, changes an update by 25-300%, about 1e-2 in the weights; 8 steps of batch 16 instead
// of 64 (the check below) end more than 1e-3 away.
TEST(GradAccum, FourMicroBatchesEqualOneBatchOfFourTimesTheSize) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 512, 16, 8);
  std::string cfg = accum_config(dir);
  auto a = train_one(cfg, "--data.batch_size=16 --training.grad_accum_steps=4 --job.out_dir=" + dir / "k4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = train_one(cfg, "--data.batch_size=64 --job.out_dir=" + dir / "b64");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const double diff = max_state_diff(dir / "k4/model.pt", dir / "b64/model.pt");
  report_figure("4 x 16 accumulated vs 64, max abs diff after 8 steps", diff);
  EXPECT_LE(diff, 1e-5);
  // Without accumulation the same micro-batch size gives a different trajectory (the test can fail).
  auto c = train_one(cfg, "--data.batch_size=16 --job.out_dir=" + dir / "b16");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_GT(max_state_diff(dir / "b16/model.pt", dir / "b64/model.pt"), 1e-3);
}

TEST(GradAccum, PartialLastGroupAveragesWhatItHas) {
  // 560 = 8 x 64 + 48: the last step has 3 micro-batches of 16, averaged over those 3, which equals the
  // 1-rank loader's final partial batch of 48. The bound is the one above, for 9 steps instead of 8 (measured: 3e-8
  // on AVX2, 4.5e-8 on the plain path); averaging the last group over 4 instead of 3 would scale that step's update by
  // 3/4, about 1e-2 in the weights.
  TempDir dir;
  write_tiny_mnist(dir / "data", 560, 16, 9);
  std::string cfg = accum_config(dir);
  auto a = train_one(cfg, "--data.batch_size=16 --training.grad_accum_steps=4 --job.out_dir=" + dir / "k4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = train_one(cfg, "--data.batch_size=64 --job.out_dir=" + dir / "b64");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const double diff = max_state_diff(dir / "k4/model.pt", dir / "b64/model.pt");
  report_figure("4 x 16 accumulated vs 64 with a partial last group, max abs diff after 9 steps", diff);
  EXPECT_LE(diff, 1e-5);
  EXPECT_NE(read_file(dir / "k4/metrics.jsonl").find("\"step\":9,"), std::string::npos);
}

// Accumulation on two ranks equals two ranks without it (batch 32 each) to float rounding, and after one step both
// equal one rank with batch 64 to rounding. Over the whole run (8 steps, lr 0.05, momentum 0.9) the two- and one-rank
// trajectories drift apart by summation order alone: 7.4e-5 on LibTorch 2.11's kernels (1.13 stayed under 1e-5),
// while a gradient left unaveraged or dropped moves weights by orders of magnitude more.
// The bounds: after one step the weights differ by lr x the gradients' rounding difference, 0.05 x a few u (u =
// 2^-24 = 6e-8) of entries below 1, under 1e-7 (measured: 1.5e-8 on AVX2, 7.5e-9 on the plain path), where an
// unaveraged all-reduce (2x) moves them by lr x |g|, about 1e-2. Two ranks with and without accumulation differ as the
// single-rank runs above do, over 8 steps (measured: 3e-8 on both paths, 33x under 1e-6). Two ranks against one rank
// over 8 steps: 7.4e-5 on AVX2 (3e-8 on the plain path) is the summation order's difference grown through 8 steps of
// changed weights; 2e-4 is 2.7x that, 50x below what a defect in the averaging does.
TEST(GradAccum, TwoRanksTimesTwoMicroBatchesEqualOneRankBatch64) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 512, 16, 10);
  std::string cfg = accum_config(dir);
  auto two = run_ranks(2, cfg + " --data.batch_size=16 --training.grad_accum_steps=2 --job.out_dir=" + dir / "two");
  for (auto& r : two) ASSERT_EQ(r.exit_code, 0) << r.output;
  auto two32 = run_ranks(2, cfg + " --data.batch_size=32 --job.out_dir=" + dir / "two32");
  for (auto& r : two32) ASSERT_EQ(r.exit_code, 0) << r.output;
  auto one = train_one(cfg, "--data.batch_size=64 --job.out_dir=" + dir / "one");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const double accumulated = max_state_diff(dir / "two/model.pt", dir / "two32/model.pt");
  const double vs_one_rank = max_state_diff(dir / "two/model.pt", dir / "one/model.pt");
  report_figure("2 ranks x 2 x 16 vs 2 ranks x 32, max abs diff after 8 steps", accumulated);
  report_figure("2 ranks x 2 x 16 vs 1 rank x 64, max abs diff after 8 steps", vs_one_rank);
  EXPECT_LE(accumulated, 1e-6);
  EXPECT_LE(vs_one_rank, 2e-4);
  auto two_step = run_ranks(2, cfg + " --data.batch_size=16 --training.grad_accum_steps=2 --training.max_steps=1" +
                                   " --job.out_dir=" + dir / "two_step");
  for (auto& r : two_step) ASSERT_EQ(r.exit_code, 0) << r.output;
  auto one_step = train_one(cfg, "--data.batch_size=64 --training.max_steps=1 --job.out_dir=" + dir / "one_step");
  ASSERT_EQ(one_step.exit_code, 0) << one_step.output;
  const double one_step_diff = max_state_diff(dir / "two_step/model.pt", dir / "one_step/model.pt");
  report_figure("2 ranks x 2 x 16 vs 1 rank x 64, max abs diff after 1 step", one_step_diff);
  EXPECT_LE(one_step_diff, 1e-6);
}

// Two in-process ranks (threads) on a counting process group: micro-steps under no_sync issue no
// collective; each optimizer step issues exactly one all-reduce per gradient bucket.
TEST(GradAccum, OneAllReduceRoundPerOptimizerStep) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 256, 16, 11);
  Config cfg = load_config(accum_config(dir), {"data.batch_size=8", "data.workers=0", "job.out_dir=" + dir / "out"});
  const int port = free_port();
  std::vector<std::vector<int64_t>> deltas(2);
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      RendezvousInfo info = rendezvous_from_env({{"RANK", std::to_string(rank)},
                                                 {"WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", std::to_string(port)}});
      DistContext ctx = init_distributed(info, cfg.dist);
      auto counting = c10::make_intrusive<CountingBackend>(ctx.group->getBackend(c10::DeviceType::CPU));
      ctx.group = with_cpu_backend(ctx.group, counting);
      Trainer trainer(cfg, ctx);
      trainer.setup();
      const Split& train = trainer.dataset().train;
      LoaderOptions opts;
      opts.batch_size = 8;
      opts.workers = 0;
      BatchLoader loader(train, eval_shard(train.size(), 2, rank), opts);
      for (int step = 0; step < 4; ++step) {
        std::vector<Batch> micro;
        for (int k = 0; k < 4; ++k) micro.push_back(*loader.next());
        const int64_t before = counting->allreduces.load();
        // The first three micro-steps alone: no collective at all.
        for (int k = 0; k < 3; ++k) trainer.forward_backward(micro[k], /*sync=*/false, 4.0);
        const int64_t after_nosync = counting->allreduces.load();
        trainer.forward_backward(micro[3], /*sync=*/true, 4.0);
        trainer.optimizer().step();
        zero_grad_in_place(trainer.optimizer());
        deltas[rank].push_back(after_nosync - before);
        deltas[rank].push_back(counting->allreduces.load() - after_nosync);
      }
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  // Net's 21,840 parameters fit one bucket (before and after the rebuild): [0 during no_sync, 1 on sync] x 4.
  const std::vector<int64_t> expected = {0, 1, 0, 1, 0, 1, 0, 1};
  EXPECT_EQ(deltas[0], expected);
  EXPECT_EQ(deltas[1], expected);
}

}  // namespace
}  // namespace ddp::test
