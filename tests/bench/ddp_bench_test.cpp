// bench/ddp_bench.py, the CPU comparison harness: a short run of both sides writes its block into a results file, kept
// runs are listed in RESULTS.md; and
// bench/overhead_bench.py, two ddptrain binaries side by side.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <regex>

namespace ddp::test {
namespace {

const std::string kQuickArgs =
    "--model net --world 2 --data synthetic --synthetic-size 512 --steps 6 --log-every 2 --warmup-steps 2 "
    "--reps 1 --no-startup-probe --timeout 120";

std::string bench_command(const std::string& args) {
  return "cd " + shell_quote(source_dir()) + " && " + python() + " bench/ddp_bench.py " + args;
}

TEST(DdpBench, ShortRunReplacesItsBlockInTheResultsFileAndKeepsTheOthers) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const std::string results = dir / "RESULTS.md";
  const std::string key = "ddp_bench " + kQuickArgs;
  write_file(results, "# header kept\n\n<!-- BEGIN other -->\nother block kept\n<!-- END other -->\n\n<!-- BEGIN " +
                          key + " -->\nstale numbers\n<!-- END " + key + " -->\n");

  const auto r = run_command(bench_command(kQuickArgs + " --results " + shell_quote(results)));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const std::string text = read_file(results);
  EXPECT_NE(text.find("# header kept"), std::string::npos) << text;
  EXPECT_NE(text.find("other block kept"), std::string::npos) << text;
  EXPECT_EQ(text.find("stale numbers"), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "<!-- BEGIN " + key + " -->"), 1u) << text;

  // The summary row: both sides trained, the ratio is theirs, both RSS figures are real processes' (> 100 MiB:
  // libtorch alone is ~157).
  std::smatch m;
  const std::regex row(R"(\| net fp32, world 2, sync on, synthetic[^|]*\| (\d+) \| (\d+) \| ([0-9.]+)x )"
                       R"(\| n/a \| n/a \| (\d+) \| (\d+) \|)");
  ASSERT_TRUE(std::regex_search(text, m, row)) << text;
  const double ours = std::stod(m[1]), theirs = std::stod(m[2]), ratio = std::stod(m[3]);
  EXPECT_GT(ours, 0);
  EXPECT_GT(theirs, 0);
  EXPECT_NEAR(ratio, ours / theirs, 0.01 + 0.5 / theirs * ratio) << m[0];
  EXPECT_GT(std::stoi(m[4]), 100) << m[0];
  EXPECT_GT(std::stoi(m[5]), 100) << m[0];
  // The block names the machine and the exact commands of both sides.
  EXPECT_NE(text.find("Machine: "), std::string::npos);
  EXPECT_NE(text.find("torch_worker.py"), std::string::npos) << text;
}

// Without --results a run is kept in bench/results/SUITE/DATE.md and listed in RESULTS.md (bench/report.py's
// keep_run, here pointed at a scratch folder): a second run of the same command the same day replaces its block,
// another command gets a folder of its own, and the list names each command's files, newest first.
TEST(DdpBench, KeptRunsGoToTheirSuiteAndDateAndResultsMdListsThem) {
  TempDir dir;
  write_file(dir / "RESULTS.md", "# kept\n\n<!-- BEGIN runs -->\nstale\n<!-- END runs -->\ntail kept\n");
  write_file(dir / "results/ddp-bench-suite-a/2020-01-01.md", "# ddp_bench --suite a\n\nan older run\n");
  const std::string code =
      "import sys; sys.path.insert(0, 'bench'); import report; report.RESULTS_DIR = sys.argv[1]; "
      "first = report.keep_run('ddp_bench --suite a', 'first numbers'); "
      "second = report.keep_run('ddp_bench --suite a', 'second numbers'); "
      "other = report.keep_run('overhead_bench --model net', 'other numbers'); "
      "assert first == second, (first, second); print(second); print(other)";
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() + " -c " + shell_quote(code) + " " +
                             shell_quote(dir / "results"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(/results/ddp-bench-suite-a/(\d{4}-\d{2}-\d{2})\.md)")))
      << r.output;
  const std::string day = m[1];
  const std::string run = read_file(dir / ("results/ddp-bench-suite-a/" + day + ".md"));
  EXPECT_NE(run.find("second numbers"), std::string::npos) << run;
  EXPECT_EQ(run.find("first numbers"), std::string::npos) << run;
  EXPECT_NE(run.find("RESULTS.md"), std::string::npos) << run;  // says where the current figures are
  EXPECT_NE(read_file(dir / ("results/overhead-bench-model-net/" + day + ".md")).find("other numbers"),
            std::string::npos);
  const std::string index = read_file(dir / "RESULTS.md");
  EXPECT_NE(index.find("# kept"), std::string::npos) << index;
  EXPECT_NE(index.find("tail kept"), std::string::npos) << index;
  EXPECT_EQ(index.find("stale"), std::string::npos) << index;
  EXPECT_NE(index.find("- ddp_bench --suite a: [" + day + "](results/ddp-bench-suite-a/" + day +
                       ".md), [2020-01-01](results/ddp-bench-suite-a/2020-01-01.md)\n"),
            std::string::npos)
      << index;
  EXPECT_NE(index.find("- overhead_bench --model net: [" + day + "](results/overhead-bench-model-net/" + day + ".md)"),
            std::string::npos)
      << index;
}

// bench/RESULTS.md lists every kept run under bench/results/ (what keep_run would write there now).
TEST(DdpBench, ResultsMdListsEveryKeptRun) {
  const std::string code =
      "import sys; sys.path.insert(0, 'bench'); import report; "
      "want, have = report.runs_index(), report.listed_runs('bench/RESULTS.md'); "
      "assert want == have, 'bench/RESULTS.md lists\\n' + '\\n'.join(have) + '\\nbench/results/ holds\\n' + "
      "'\\n'.join(want); assert len(want) > 3, want";
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() + " -c " + shell_quote(code));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(DdpBench, FailingTrainerEndsTheRunNamingTheRankAndItsOutputsAndLeavesResultsAlone) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const std::string fake = dir / "ddptrain";
  write_file(fake, "#!/bin/sh\necho 'error: injected failure' >&2\nexit 3\n");
  ASSERT_EQ(run_command("chmod +x " + shell_quote(fake)).exit_code, 0);
  const std::string results = dir / "RESULTS.md";
  write_file(results, "untouched\n");

  // The bench keeps a failed run's work folder for the outputs its error names: here, inside this test's folder.
  const std::string work = dir / "work";
  const auto r = run_command(bench_command(kQuickArgs + " --results " + shell_quote(results) + " --ddptrain " +
                                           shell_quote(fake) + " --work-dir " + shell_quote(work)));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 0 exit 3: error: injected failure"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(results), "untouched\n");
  const std::smatch named = [&] {
    std::smatch m;
    std::regex_search(r.output, m, std::regex("outputs in (/\\S+)"));
    return m;
  }();
  ASSERT_FALSE(named.empty()) << r.output;
  EXPECT_EQ(named[1].str().rfind(work + "/", 0), 0u) << named[1];
  EXPECT_TRUE(std::filesystem::is_directory(named[1].str())) << named[1];
}

// --link: the two ranks in two network namespaces joined by a shaped veth pair. Both sides train over it (their
// commands run in the namespaces, Gloo on the link's interface), the block names the link and its measured rate
// (near the 1 Gbit/s it was shaped to: an unshaped veth moves several times more), and no namespace is left.
TEST(DdpBench, LinkModeRunsBothSidesBetweenTwoShapedNamespacesAndRemovesThem) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  if (geteuid() != 0 || run_command("command -v ip && command -v tc").exit_code != 0)
    GTEST_SKIP() << "the link needs root and iproute2";
  TempDir dir;
  const std::string results = dir / "RESULTS.md";
  const auto r = run_command(bench_command(kQuickArgs + " --link 1gbit --grad-compression fp16 --ddptrain-skip-zero" +
                                           " --results " + shell_quote(results)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = read_file(results);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(tbf 1gbit each way, [^
]*measured ([0-9.]+) Gbit/s one way)")))
      << text;
  EXPECT_GT(std::stod(m[1]), 0.5) << m[0];
  EXPECT_LT(std::stod(m[1]), 1.1) << m[0];
  const std::regex row(R"(\| net fp32, world 2, sync on, synthetic[^|]*over a 1gbit link \| (\d+) \| (\d+) \|)");
  ASSERT_TRUE(std::regex_search(text, m, row)) << text;
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_GT(std::stoi(m[2]), 0);
  for (const std::string said : {"ip netns exec ddpbench", "GLOO_SOCKET_IFNAME=bench0", "skip_zero_gradients = true",
                                 "grad_compression = \"fp16\"", "--grad-compression fp16"})
    EXPECT_NE(text.find(said), std::string::npos) << said << "\n" << text;
  EXPECT_EQ(run_command("ip netns list").output.find("ddpbench"), std::string::npos);
}

// One configuration's results as report.sync_cost_lines reads them: each side's rates per repetition (Python literals).
std::string side_results(const std::string& ddptrain_rates, const std::string& python_rates) {
  auto side = [](const std::string& rates) {
    return "{'rates': [" + rates + "], 'phases': [{'data': 0.001, 'comm': 0.01}]}";
  };
  return "{'ddptrain': " + side(ddptrain_rates) + ", 'python': " + side(python_rates) + "}";
}

// The sync-cost table's arithmetic: cost per step = global batch x (1 / rate on - 1 / rate off), beside the floor.
TEST(DdpBench, SyncCostIsTheStepTimeDifferenceAndAMultipleOfItsFloor) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  const std::string pair =
      "dict(label='L', global_batch=128, floor_s=0.004, floor_what='one copy', on=" + side_results("640", "320") +
      ", off=" + side_results("800", "400") + ")";
  const auto r = run_command("cd " + shell_quote(source_dir() + "/bench") + " && " + python() +
                             " -c \"import report; print('\\n'.join(report.sync_cost_lines([" + pair + "])))\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // ddptrain: 128 x (1/640 - 1/800) = 40 ms, 10x the 4 ms floor; Python 128 x (1/320 - 1/400) = 80 ms.
  EXPECT_NE(r.output.find("| L | 0.80x | 0.80x | 40.0 | 80.0 | 4.00 | 10.0x | 20.0x | 0.50x |"), std::string::npos)
      << r.output;
  // The all-reduce wait of 10 ms leaves 0% of the 4 ms floor hidden.
  EXPECT_NE(r.output.find("| L | 1.00 / 10.0 | 0% |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("- L: one copy"), std::string::npos) << r.output;
}

// Sync on / off by repetition: repetition k of sync on over repetition k of sync off, their median and each value
// (not the ratio of the medians); the configurations run repetition by repetition, so those two ran minutes apart.
TEST(DdpBench, SyncOnOffByRepetitionPairsTheSameRepetitionOfBothConfigurations) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  const std::string pair = "dict(label='L', global_batch=128, floor_s=0.004, floor_what='one copy', on=" +
                           side_results("600, 700, 650", "320, 300") +
                           ", off=" + side_results("800, 700, 1000", "400, 300") + ")";
  const auto r = run_command("cd " + shell_quote(source_dir() + "/bench") + " && " + python() +
                             " -c \"import report, ddp_bench; print('\\n'.join(report.sync_cost_lines([" + pair +
                             "]))); print(ddp_bench.repetition_order([dict(reps=2), dict(reps=1), dict(reps=3)]))\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // ddptrain: 0.75, 1.00, 0.65 by repetition (median 0.75x) where the medians give 650 / 800 = 0.81x; Python
  // 0.80, 1.00.
  EXPECT_NE(r.output.find("| L | 0.81x | 0.89x |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| 0.75x (0.75, 1.00, 0.65) | 0.90x (0.80, 1.00) |"), std::string::npos) << r.output;
  // Repetition 1 of every configuration, then repetition 2 of those that have one, then the third.
  EXPECT_NE(r.output.find("[(0, 0), (0, 1), (0, 2), (1, 0), (1, 2), (2, 2)]"), std::string::npos) << r.output;
}

// ddptrain's metrics.jsonl gives seconds per step of each interval; the harness weighs them by the interval's steps
// and leaves out the warm-up: 20 steps at 5 ms and 10 at 2 ms after a first interval of 20 at 50 ms give 4 ms.
TEST(DdpBench, DdptrainPhaseTimesAreAveragedPerStepOverTheTimedIntervals) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  std::string jsonl;
  for (const auto& [step, compute] : std::vector<std::pair<int, double>>{{20, 0.05}, {40, 0.005}, {50, 0.002}})
    jsonl += "{\"kind\":\"train\",\"step\":" + std::to_string(step) +
             ",\"samples\":128,\"samples_per_s\":1000,\"time_data_s\":0,\"time_compute_s\":" + std::to_string(compute) +
             ",\"time_comm_s\":0,\"time_optimizer_s\":0}\n";
  write_file(dir / "metrics.jsonl", jsonl);
  const auto r = run_command("cd " + shell_quote(source_dir() + "/bench") + " && " + python() +
                             " -c \"import ddp_bench as d; i, p = d.ddptrain_intervals('" + dir / "metrics.jsonl" +
                             "'); print('compute %.6f' % d.timed_phases(i, p, 20)['compute'])\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compute 0.004000"), std::string::npos) << r.output;
}

// --data image_folder: both sides get the folder, 3 channels, its class count, the crop size and the decode workers
// (ddptrain's data.workers threads, DataLoader's worker processes).
TEST(DdpBench, ImageFolderGivesBothSidesTheFolderCropSizeAndDecodeWorkers) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  for (const char* k : {"a", "b", "c"}) std::filesystem::create_directories(dir / ("f/train/" + std::string(k)));
  const auto r = run_command(
      "cd " + shell_quote(source_dir() + "/bench") + " && " + python() +
      " -c \"import ddp_bench as d\n"
      "a = d.parse_args(['--model', 'resnet18', '--data', 'image_folder', '--data-dir', '" +
      dir / "f" +
      "', '--world', '2', '--image-size', '64', '--data-workers', '2'])\n"
      "c = d.configs_from(a)[0]\n"
      "t = d.ddptrain_toml(c, 'init.pt')\n"
      "v = d.python_launch(c, 'init.pt', 'run', False)[0][0]\n"
      "print(c['in_channels'], c['num_classes'], 'dataset = \\\"image_folder\\\"' in t, 'image_size = 64' in t, "
      "'workers = 2' in t, v[v.index('--workers') + 1], v[v.index('--image-size') + 1], v[v.index('--num-classes') + "
      "1])"
      "\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 3 True True True 2 64 3"), std::string::npos) << r.output;
}

// --device: both sides get it and the same backend, Gloo where the ranks outnumber the GPUs (NCCL refuses two ranks on
// one GPU), else NCCL; the GPU count is stubbed so that this runs without one, where --device cuda is refused.
TEST(DdpBench, DeviceGoesToBothSidesWithTheBackendTheGpusAllow) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  const auto r = run_command("cd " + shell_quote(source_dir() + "/bench") + " && " + python() +
                             " -c \"import torch, ddp_bench as d\n"
                             "def sides(gpus, *argv):\n"
                             "    torch.cuda.is_available = lambda: gpus > 0\n"
                             "    torch.cuda.device_count = lambda: gpus\n"
                             "    c = d.configs_from(d.parse_args(['--world', '2'] + list(argv)))[0]\n"
                             "    t = d.ddptrain_toml(c, 'init.pt')\n"
                             "    v = d.python_launch(c, 'init.pt', 'run', False)[0][0]\n"
                             "    return [l for l in t.splitlines() if l.startswith(('device', 'backend'))] + "
                             "[v[v.index('--device') + 1], v[v.index('--backend') + 1], 'cuda (' in d.label_of(c)]\n"
                             "print(sides(0))\n"
                             "print(sides(1, '--device', 'cuda'))\n"
                             "print(sides(2, '--device', 'cuda'))\n"
                             "try:\n"
                             "    sides(0, '--device', 'cuda')\n"
                             "except SystemExit as e:\n"
                             "    print('refused:', e)\n"
                             "\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("['device = \"cpu\"', 'backend = \"gloo\"', 'cpu', 'gloo', False]\n"
                          "['device = \"cuda\"', 'backend = \"gloo\"', 'cuda', 'gloo', True]\n"
                          "['device = \"cuda\"', 'backend = \"nccl\"', 'cuda', 'nccl', True]\n"
                          "refused: --device cuda: torch sees no GPU"),
            std::string::npos)
      << r.output;
}

// bench/overhead_bench.py with the same binary on both sides: its block holds both medians, their ratio and every
// repetition; without --baseline it refuses to run.
TEST(OverheadBench, SameBinaryOnBothSidesGivesBothMediansAndTheirRatio) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const std::string results = dir / "RESULTS.md";
  const std::string script = "cd " + shell_quote(source_dir()) + " && " + python() + " bench/overhead_bench.py ";
  const std::string args =
      "--model net --world 2 --data synthetic --synthetic-size 512 --steps 6 --log-every 2 --warmup-steps 2 "
      "--reps 2 --timeout 120 --results " +
      shell_quote(results);
  const auto r = run_command(script + "--baseline " + shell_quote(ddptrain_path()) + " " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = read_file(results);
  std::smatch m;
  const std::regex row(R"(\| net fp32, world 2, sync on, synthetic[^|]*\| (\d+) \| (\d+) \| ([0-9.]+)x \| )"
                       R"(([0-9]+), ([0-9]+); ([0-9]+), ([0-9]+) \|)");
  ASSERT_TRUE(std::regex_search(text, m, row)) << text;
  const double mine = std::stod(m[1]), base = std::stod(m[2]);
  EXPECT_GT(mine, 0);
  EXPECT_GT(base, 0);
  EXPECT_NEAR(std::stod(m[3]), mine / base, 0.01 + 0.5 / base * mine / base) << m[0];
  for (int i = 4; i <= 7; ++i) EXPECT_GT(std::stoi(m[i]), 0) << m[0];
  EXPECT_NE(text.find("<!-- BEGIN overhead_bench "), std::string::npos) << text;
  const auto refused = run_command(script + args);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("usage: overhead_bench.py --baseline"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace ddp::test
