// A checkpoint written by ddptrain 0.3.0 (tests/fixtures/checkpoint-0.3.0): every part takes its entries back exactly,
// and training resumed from it is bit for bit training resumed from today's checkpoint of the same state.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

// 0.3.0 wrote step-00000004.pt on 2 ranks (fp16 autocast, dynamic loss scaling, accumulation 2, dropout) while
// training cfg.toml for 10 steps. The floats of a training step depend on the CPU's vector units, so a run on this
// machine is compared with runs on this machine only:
//  1. today's ddptrain resumes the 0.3.0 file and, training no step (max_steps = 4), writes it again: every entry
//     torch.load reads (model, optimizer state, scaler, position, both ranks' generator states) equals the 0.3.0
//     file's, and the config is recognised as the same (no warning) although 0.3.0 hashed it another way;
//  2. resumed to the end from the 0.3.0 file, and from that rewritten file, the runs end with the same bytes.
// With the exact resume of today's checkpoints (resume_test.cpp) this is: a 0.3.0 checkpoint resumes bit-identically.
TEST(OldCheckpoint, OneWrittenByDdptrain030LoadsEntryForEntryAndResumesBitIdentically) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  write_tiny_mnist(dir / "data", 320, 32, 12);
  const std::string fixture = source_dir() + "/tests/fixtures/checkpoint-0.3.0";
  std::filesystem::copy_file(fixture + "/cfg.toml", dir / "cfg.toml");
  const std::string old_file = fixture + "/step-00000004.pt";
  auto run = [&](const std::string& out, const std::string& from, const std::string& more) {
    const auto ranks = run_ranks(
        2,
        "cfg.toml --metrics.progress=plain --job.out_dir=" + out + " --checkpoint.resume=" + shell_quote(from) + more,
        "", 1, dir.path());
    for (const auto& r : ranks) EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(ranks[0].output.find("at step 4 (epoch 1, micro-batch 8)"), std::string::npos) << ranks[0].output;
    EXPECT_EQ(warnings_of_the_job(ranks[0].output), "") << ranks[0].output;
  };
  run("rewritten", old_file, " --training.max_steps=4");
  const std::string rewritten = dir / "rewritten/checkpoints/step-00000004.pt";
  ASSERT_TRUE(std::filesystem::exists(rewritten));
  // The final evaluation of the step-less run sets best_accuracy; config and config_hash are today's text and digest.
  const auto same = run_command(
      python() +
      " -c \"import sys, torch\n"
      "a, b = (torch.load(p, weights_only=False) for p in sys.argv[1:])\n"
      "added = ('world_size_history', 'epoch_order_world')  # entries newer than 0.3.0\n"
      "assert list(a) == [k for k in b if k not in added], (list(a), list(b))\n"
      "def eq(x, y):\n"
      "    if isinstance(x, torch.Tensor): return x.dtype == y.dtype and torch.equal(x, y)\n"
      "    if isinstance(x, dict): return list(x) == list(y) and all(eq(x[k], y[k]) for k in x)\n"
      "    if isinstance(x, (list, tuple)): return len(x) == len(y) and all(map(eq, x, y))\n"
      "    return type(x) == type(y) and x == y\n"
      "for k in a:\n"
      "    if k not in ('best_accuracy', 'config', 'config_hash'): print(k, 'same' if eq(a[k], b[k]) else 'DIFFERS')\n"
      "\" " +
      shell_quote(old_file) + " " + shell_quote(rewritten));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  for (const char* entry : {"format_version", "model", "optimizer_name", "optimizer", "scaler", "global_step", "epoch",
                            "batch_in_epoch", "epoch_sample_offset", "batch_size", "world_size", "rng_cpu", "rng_cuda"})
    EXPECT_NE(same.output.find(std::string(entry) + " same\n"), std::string::npos) << entry << "\n" << same.output;
  EXPECT_EQ(same.output.find("DIFFERS"), std::string::npos) << same.output;
  run("from_old", old_file, "");
  run("from_rewritten", rewritten, "");
  EXPECT_EQ(read_file(dir / "from_old/model.pt"), read_file(dir / "from_rewritten/model.pt"))
      << "max diff " << max_state_diff(dir / "from_old/model.pt", dir / "from_rewritten/model.pt");
}

}  // namespace
}  // namespace ddp::test
