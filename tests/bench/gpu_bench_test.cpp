// bench/gpu_bench.py (the GPU comparison: ddptrain eager and CUDA graph, Python eager and torch.compile) in its CPU
// smoke mode: the sides that can run on a CPU train, the graph side is n/a, the figures, ratios, goals and report come
// out. Its GPU figures need a GPU (scripts/gpu-check); this checks the plumbing only.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

namespace ddp::test {
namespace {

// Checks bench.json (argv[1]) against goals.tsv (argv[2]): which sides ran, medians from the repetitions, every ratio
// from the medians, each goal's verdict from its ratio and bound.
constexpr const char* kCheckJson = R"PY(
import json, statistics, sys
j = json.load(open(sys.argv[1]))
sides = ["ddptrain_eager", "ddptrain_graph", "python_eager", "python_compiled"]
assert j["sides"] == sides, j["sides"]
f = j["figures"][0]
c, plan, med, ratio, results = f["config"], f["sides"], f["median"], f["ratio"], f["results"]
ran = [s for s in sides if plan[s]["ran"]]
assert ran == ["ddptrain_eager", "python_eager", "python_compiled"], plan
why = plan["ddptrain_graph"]["reason"]
assert "CUDA" in why and "not attempted" in why, why
assert sorted(results) == sorted(ran), sorted(results)
assert f["order"] == [[0, s] for s in ran], f["order"]  # one repetition: the sides in their order
for s in sides:
    reps = results.get(s, [])
    for key in ("rate", "gpu_mem_peak_mib", "rss_mib"):
        values = [v for r in reps for v in (r[key] if key == "rss_mib" else [r[key]]) if v is not None]
        want = statistics.median(values) if values else None
        assert med[s][key] == want, (s, key, med[s][key], want)
    if s in ran:
        assert med[s]["rate"] > 0 and med[s]["rss_mib"] > 0, (s, med[s])
    assert med[s]["gpu_mem_peak_mib"] is None, (s, med[s])  # no GPU
def expect(metric, a, b):
    x, y = med[a][metric], med[b][metric]
    want = None if x is None or not y else x / y
    got = ratio[metric][a + "/" + b]
    assert (got is None and want is None) or abs(got - want) < 1e-12, (metric, a, b, got, want)
    return got
assert sorted(ratio["rate"]) == sorted(["ddptrain_eager/python_eager", "ddptrain_graph/python_eager",
                                        "ddptrain_graph/python_compiled"]), ratio["rate"]
eager = expect("rate", "ddptrain_eager", "python_eager")
assert eager is not None
assert expect("rate", "ddptrain_graph", "python_eager") is None
assert expect("rate", "ddptrain_graph", "python_compiled") is None
for metric in ("gpu_mem_peak_mib", "rss_mib"):
    assert sorted(ratio[metric]) == sorted(s + "/python_eager" for s in sides if s != "python_eager"), ratio[metric]
    for s in sides:
        if s != "python_eager":
            expect(metric, s, "python_eager")
assert ratio["rss_mib"]["ddptrain_eager/python_eager"] > 0 and ratio["rss_mib"]["python_compiled/python_eager"] > 0
# Python compiled went through torch.compile, and compiled its graphs inside the warm-up.
steps = [r["compiled_at_steps"] for r in results["python_compiled"]]
assert all(rep and max(rep) <= c["warmup_steps"] for rep in steps), (steps, c["warmup_steps"])
assert all("compiled_at_steps" not in r for r in results["python_eager"])
# The goals: ResNet-18's three, the first's verdict from its ratio, the two needing the graph side n/a.
goals = [line.rstrip("\n").split("\t") for line in open(sys.argv[2])]
assert [g for g, _, _ in goals] == [g for g, _, _ in j["goals"]] and len(goals) == 3, goals
assert "ddptrain eager samples/s >= 1.1x Python eager" in goals[0][0], goals[0]
assert goals[0][2] == ("met" if eager >= 1.1 else "not met"), (goals[0], eager)
assert goals[0][1].endswith(f"= {eager:.2f}x"), goals[0]
assert [v for _, _, v in goals[1:]] == ["n/a", "n/a"], goals
assert all("ddptrain graph did not run" in figure for _, figure, _ in goals[1:]), goals
print("ok", {s: med[s]["rate"] for s in sides}, eager)
)PY";

// bench/gpu_bench.py --device cpu --smoke `flags` from the checkout with `ddptrain`, its outputs in dir: work/,
// bench.json, bench.md, goals.tsv.
CommandResult gpu_bench_smoke(const TempDir& dir, const std::string& ddptrain, const std::string& flags) {
  return run_command("cd " + shell_quote(source_dir()) + " && " + python() +
                     " bench/gpu_bench.py --device cpu --smoke " + flags + " --ddptrain " + shell_quote(ddptrain) +
                     " --work-dir " + shell_quote(dir / "work") + " --json " + shell_quote(dir / "bench.json") +
                     " --markdown " + shell_quote(dir / "bench.md") + " --goals " + shell_quote(dir / "goals.tsv"));
}

TEST(GpuBench, CpuSmokeRunsEverySideButTheGraphOneAndWritesTheReport) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const auto r =
      gpu_bench_smoke(dir, ddptrain_path(), "--only synthetic --threads 1 --timeout 120 --compile-timeout 120");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The graph side was not attempted on a CPU: no run folder, no ddptrain started for it.
  EXPECT_TRUE(std::filesystem::exists(dir / "work/config0/ddptrain_eager.rep0"));
  EXPECT_FALSE(std::filesystem::exists(dir / "work/config0/ddptrain_graph.rep0"));

  write_file(dir / "check.py", kCheckJson);
  const auto check = run_command(python() + " " + shell_quote(dir / "check.py") + " " +
                                 shell_quote(dir / "bench.json") + " " + shell_quote(dir / "goals.tsv"));
  EXPECT_EQ(check.exit_code, 0) << check.output;

  // The report's rows say the same: the rates of the three sides that ran, the ddptrain eager / Python eager ratio,
  // n/a for the graph side and its ratios; no GPU memory, peak RSS of each side that ran (with its ratio over Python
  // eager's).
  const std::string md = read_file(dir / "bench.md");
  const std::string label = R"(\| smoke resnet18 synthetic 3x16x16, fp16, channels_last, batch 4, world 1, cpu[^|]*)";
  const std::regex rates(label + R"(\| [0-9.]+ \| n/a \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \| n/a \| n/a \|)");
  EXPECT_TRUE(std::regex_search(md, rates)) << md;
  const std::regex memory(label + R"(\| n/a \| n/a \| n/a \| n/a \| [0-9.]+ \([0-9.]+x\) \| n/a \| [0-9.]+ \| )"
                                  R"([0-9.]+ \([0-9.]+x\) \|)");
  EXPECT_TRUE(std::regex_search(md, memory)) << md;
  EXPECT_NE(md.find("ddptrain graph n/a: training.cuda_graph"), std::string::npos) << md;
  EXPECT_NE(md.find("within the warm-up (step 1, not timed)"), std::string::npos) << md;
  EXPECT_NE(md.find("eager `torch.optim.SGD`"), std::string::npos) << md;
  // The commands of the three sides and ddptrain's config are in the report.
  EXPECT_NE(md.find("torch_worker.py"), std::string::npos) << md;
  EXPECT_NE(md.find("--precision fp16 --device cpu"), std::string::npos) << md;
  EXPECT_NE(md.find("--drop-last --compile default --compile-backend eager"), std::string::npos) << md;
  EXPECT_NE(md.find("memory_format = \"channels_last\""), std::string::npos) << md;
  EXPECT_NE(md.find("fused = true"), std::string::npos) << md;
}

// A side that fails is n/a in the report with its error, the others go on, and the run exits non-zero; --sides runs
// only the sides named, the others n/a. A ddptrain that prints its config but fails to train stands in for a failing
// side (no Python side runs, so this takes seconds).
TEST(GpuBench, FailingSideIsReportedNotApplicableAndTheRunFails) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_file(dir / "ddptrain", "#!/bin/sh\ncase \" $* \" in *\" --print-config \"*) exec " +
                                   shell_quote(ddptrain_path()) +
                                   " \"$@\" ;; esac\necho 'capture refused here' >&2\nexit 3\n");
  ASSERT_EQ(run_command("chmod +x " + shell_quote(dir / "ddptrain")).exit_code, 0);
  const auto r = gpu_bench_smoke(dir, dir / "ddptrain", "--sides ddptrain_eager");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("failed: smoke resnet18 synthetic 3x16x16: ddptrain eager"), std::string::npos) << r.output;
  const std::string md = read_file(dir / "bench.md");
  EXPECT_NE(md.find("ddptrain eager n/a: failed in repetition 1: rank 0 exit 3: capture refused here"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Python eager n/a: not selected (--sides)"), std::string::npos) << md;
  const auto check = run_command(
      python() + " -c " +
      shell_quote(
          "import json, sys\n"
          "f = json.load(open(sys.argv[1]))['figures'][0]\n"
          "assert f['sides']['ddptrain_eager']['failed'] and not f['sides']['ddptrain_eager']['ran'], f\n"
          "assert all(not v['ran'] and not v['failed'] for s, v in f['sides'].items() if s != 'ddptrain_eager')\n"
          "assert f['results'] == {} and f['order'] == [], f\n"
          "assert all(v is None for m in f['median'].values() for v in m.values()), f['median']\n"
          "assert all(v is None for r in f['ratio'].values() for v in r.values()), f['ratio']\n"
          "goals = [line.rstrip('\\n').split('\\t') for line in open(sys.argv[2])]\n"
          "assert len(goals) == 3 and all(v == 'n/a' for _, _, v in goals), goals\n") +
      " " + shell_quote(dir / "bench.json") + " " + shell_quote(dir / "goals.tsv"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// The image-folder configuration's plumbing on a CPU: the JPEG folder generated once, the sides that run on a CPU
// (ddptrain CPU decode, Python DataLoader, ddptrain synthetic) train on it or beside it, GPU decode and DALI are n/a
// with their reasons, the ratios come from the medians.
TEST(GpuBench, ImageFolderSmokeGeneratesTheFolderAndRunsTheCpuSides) {
  if (!python_has_modules("torch, torchvision, PIL, numpy")) GTEST_SKIP() << python() << " lacks torchvision or PIL";
  TempDir dir;
  const auto r =
      gpu_bench_smoke(dir, ddptrain_path(),
                      "--only 'image folder' --threads 1 --timeout 120 --image-root " + shell_quote(dir / "images"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "images/48x64x48q90/train/class_03/img_00003.jpg"));
  const std::string toml = read_file(dir / "work/config0/ddptrain_eager.toml");
  EXPECT_NE(toml.find("dataset = \"image_folder\""), std::string::npos) << toml;
  EXPECT_NE(toml.find("decode = \"cpu\""), std::string::npos) << toml;
  EXPECT_NE(read_file(dir / "work/config0/ddptrain_gpu_decode.toml").find("decode = \"gpu\""), std::string::npos);
  EXPECT_NE(read_file(dir / "work/config0/synthetic.toml").find("dataset = \"synthetic\""), std::string::npos);
  const auto check = run_command(
      python() + " -c " +
      shell_quote(
          "import json, sys\n"
          "f = json.load(open(sys.argv[1]))['figures'][0]\n"
          "ran = [s for s, v in f['sides'].items() if v['ran']]\n"
          "assert ran == ['ddptrain_eager', 'python_eager', 'synthetic'], f['sides']\n"
          "for s in ('ddptrain_gpu_decode', 'dali'):\n"
          "    assert 'CUDA' in f['sides'][s]['reason'], f['sides'][s]\n"
          "med, ratio = f['median'], f['ratio']['rate']\n"
          "assert all(med[s]['rate'] > 0 for s in ran), med\n"
          "want = med['ddptrain_eager']['rate'] / med['synthetic']['rate']\n"
          "assert abs(ratio['ddptrain_eager/synthetic'] - want) < 1e-12, ratio\n"
          "want = med['ddptrain_eager']['rate'] / med['python_eager']['rate']\n"
          "assert abs(ratio['ddptrain_eager/python_eager'] - want) < 1e-12, ratio\n"
          "assert ratio['ddptrain_gpu_decode/synthetic'] is None and ratio['ddptrain_gpu_decode/dali'] is None\n") +
      " " + shell_quote(dir / "bench.json"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  const std::string md = read_file(dir / "bench.md");
  EXPECT_NE(md.find("| configuration | ddptrain CPU decode samples/s | ddptrain GPU decode samples/s | Python "
                    "DataLoader samples/s | DALI mixed samples/s | ddptrain synthetic samples/s |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("ddptrain GPU decode n/a: decodes JPEGs with nvJPEG on a CUDA device"), std::string::npos) << md;
}

TEST(GpuBench, UnknownSideIsRefused) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() +
                             " bench/gpu_bench.py --device cpu --smoke --sides python_eager,python_graph 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("not 'python_eager,python_graph'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp::test
