// training.deterministic / training.cudnn_benchmark, GPU facts on a CPU run, and the device-dependent amp.dtype.
//
// The switches land in ATen's global context as torch.use_deterministic_algorithms and torch.backends.cudnn set
// them; a deterministic CPU run trains bit-identically to the default one (nothing it uses lacks a deterministic
// kernel); a CPU run reports no GPU figures; amp.dtype = auto is bfloat16 on CPU.
#include "train/device_settings.h"
#include "report/gpu_memory.h"
#include "tests/support/test_support.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

namespace ddp::test {
namespace {

struct ContextFlagsRestore {
  ~ContextFlagsRestore() { configure_math_modes(TrainingConfig{}, torch::kCPU); }
};

TEST(MathModes, DeterministicSetsTorchsSwitchesAndCublasWorkspace) {
  ContextFlagsRestore restore;
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  TrainingConfig t;
  t.deterministic = true;
  configure_math_modes(t, torch::kCPU);
  auto& ctx = at::globalContext();
  EXPECT_TRUE(ctx.deterministicAlgorithms());
  EXPECT_FALSE(ctx.deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(ctx.deterministicCuDNN());
  EXPECT_FALSE(ctx.benchmarkCuDNN());
  ASSERT_NE(std::getenv("CUBLAS_WORKSPACE_CONFIG"), nullptr);
  EXPECT_STREQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
  // A user's own workspace setting is kept.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);
  configure_math_modes(t, torch::kCPU);
  EXPECT_STREQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), ":16:8");
  unsetenv("CUBLAS_WORKSPACE_CONFIG");

  TrainingConfig fast;
  fast.cudnn_benchmark = {false, true};
  configure_math_modes(fast, torch::kCPU);
  EXPECT_FALSE(ctx.deterministicAlgorithms());
  EXPECT_FALSE(ctx.deterministicCuDNN());
  EXPECT_TRUE(ctx.benchmarkCuDNN());
  EXPECT_TRUE(ctx.allowTF32CuDNN());  // PyTorch's default
  fast.cudnn_allow_tf32 = false;
  configure_math_modes(fast, torch::kCPU);
  EXPECT_FALSE(ctx.allowTF32CuDNN());
  configure_math_modes(TrainingConfig{}, torch::kCPU);
  EXPECT_TRUE(ctx.allowTF32CuDNN());
}

// training.cudnn_benchmark = "auto" (the default) is on for CUDA unless training.deterministic, off elsewhere; an
// explicit true or false is kept; the banner names the choice on CUDA only.
TEST(MathModes, CudnnBenchmarkAutoIsOnForCudaUnlessDeterministic) {
  const c10::Device cuda(torch::kCUDA, 0);
  const TrainingConfig defaults = parse_config("", "x.toml").training;
  EXPECT_TRUE(defaults.cudnn_benchmark.automatic);
  EXPECT_TRUE(cudnn_benchmark_on(defaults, cuda));
  EXPECT_FALSE(cudnn_benchmark_on(defaults, torch::kCPU));
  EXPECT_EQ(cudnn_benchmark_text(defaults, cuda), "cudnn.benchmark on (auto)");
  EXPECT_EQ(cudnn_benchmark_text(defaults, torch::kCPU), "");
  const TrainingConfig deterministic = parse_config("[training]\ndeterministic = true\n", "x.toml").training;
  EXPECT_FALSE(cudnn_benchmark_on(deterministic, cuda));
  EXPECT_EQ(cudnn_benchmark_text(deterministic, cuda), "cudnn.benchmark off (auto: deterministic)");
  const TrainingConfig off = parse_config("[training]\ncudnn_benchmark = false\n", "x.toml").training;
  EXPECT_FALSE(cudnn_benchmark_on(off, cuda));
  EXPECT_EQ(cudnn_benchmark_text(off, cuda), "cudnn.benchmark off");
  const TrainingConfig on = parse_config("", "x.toml", {"training.cudnn_benchmark=true"}).training;
  EXPECT_TRUE(cudnn_benchmark_on(on, cuda));
  EXPECT_TRUE(cudnn_benchmark_on(on, torch::kCPU));  // as torch.backends.cudnn.benchmark = True on a CPU run
  EXPECT_EQ(cudnn_benchmark_text(on, cuda), "cudnn.benchmark on");
  ContextFlagsRestore restore;
  configure_math_modes(defaults, torch::kCPU);
  EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
  configure_math_modes(defaults, cuda);  // sets ATen's flag only: no CUDA operation
  EXPECT_TRUE(at::globalContext().benchmarkCuDNN());
}

TEST(MathModes, CpuRunReportsNoGpu) {
  EXPECT_FALSE(describe_gpu(torch::kCPU).has_value());
  EXPECT_FALSE(peak_gpu_memory_bytes(torch::kCPU).has_value());
  EXPECT_EQ(gpu_summary(torch::kCPU), "");
}

TEST(MathModes, DeterministicCpuTrainingIsBitIdenticalToDefault) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 256, 64, 31, {"data.batch_size=32", "model.dropout=0.5"});
  const std::string resnet =
      " --model.name=resnet18 --data.image_size=32 --data.dataset=synthetic "
      "--data.synthetic_train_size=96 --data.synthetic_test_size=32 --training.max_steps=3";
  for (const std::string& model : std::vector<std::string>{"", resnet}) {
    auto plain =
        run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + model + " --job.out_dir=" + dir / "plain");
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    auto det = run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + model +
                           " --job.out_dir=" + dir / "det --training.deterministic=true");
    ASSERT_EQ(det.exit_code, 0) << det.output;
    EXPECT_EQ(read_file(dir / "plain/model.pt"), read_file(dir / "det/model.pt")) << model;
    EXPECT_EQ(read_file(dir / "plain/metrics.jsonl").find("gpu_mem_peak_mib"), std::string::npos);
  }
}

TEST(MathModes, AmpDtypeNamesAndTheCpuDefault) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 128, 64, 32, {"data.batch_size=32", "metrics.progress=plain"});
  auto run = [&](const std::string& args) {
    auto r = run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " --amp.enabled=true " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  EXPECT_NE(run("--job.out_dir=" + dir / "a").find("| amp bfloat16\n"), std::string::npos);
  EXPECT_NE(run("--job.out_dir=" + dir / "b --amp.dtype=float16").find("| amp float16\n"), std::string::npos);
  EXPECT_NE(run("--job.out_dir=" + dir / "c --amp.dtype=fp16").find("| amp float16\n"), std::string::npos);
  // float16 scales the loss by default (auto = dynamic for float16), and the old name means the same run.
  EXPECT_EQ(read_file(dir / "b/model.pt"), read_file(dir / "c/model.pt"));
  EXPECT_NE(read_file(dir / "b/metrics.jsonl").find("\"loss_scale\":65536"), std::string::npos);
  EXPECT_NE(read_file(dir / "a/metrics.jsonl").find("\"loss_scale\":1,"), std::string::npos);
}

// model.memory_format = "auto" on the CPU: net's channels_last in float32, contiguous under autocast (oneDNN's NHWC
// kernels in bfloat16 and float16 are the slower ones there). The weights are bit for bit those of the layout named
// outright, and not those of the other layout. Where a CPU's kernels train both layouts to the same bits in one
// autocast dtype (oneDNN's bfloat16 convolutions on AVX-512 BF16 reorder both into one blocked layout), that dtype
// cannot tell them apart; float32 must, and where neither autocast dtype can, the autocast choice is not checked.
TEST(MathModes, AutoMemoryFormatOnTheCpuIsNetsChannelsLastInFloat32AndContiguousUnderAutocast) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 128, 64, 32, {"data.batch_size=32", "metrics.progress=plain"});
  auto trained = [&](const std::string& name, const std::string& args) {
    auto r =
        run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / name + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_file(dir / (name + "/model.pt"));
  };
  int autocast_told_apart = 0;
  for (const std::string dtype : {"", "bfloat16", "float16"}) {
    SCOPED_TRACE(dtype.empty() ? "float32" : dtype);
    const std::string amp = dtype.empty() ? "" : "--amp.enabled=true --amp.dtype=" + dtype;
    const std::string tag = dtype.empty() ? "float32" : dtype;
    const std::string automatic = trained(tag + "_auto", amp);
    const std::string nhwc = trained(tag + "_nhwc", amp + " --model.memory_format=channels_last");
    const std::string nchw = trained(tag + "_nchw", amp + " --model.memory_format=contiguous");
    if (nhwc == nchw) {
      ASSERT_FALSE(dtype.empty()) << "the two layouts trained to the same bits in float32: this run cannot tell them "
                                     "apart";
      std::cout << "[ figures ] " << dtype << ": both layouts train to the same bits on this CPU\n";
      continue;
    }
    autocast_told_apart += !dtype.empty();
    EXPECT_EQ(automatic, dtype.empty() ? nhwc : nchw);
  }
  if (autocast_told_apart == 0) GTEST_SKIP() << "neither autocast dtype tells the layouts apart on this CPU";
}

}  // namespace
}  // namespace ddp::test
