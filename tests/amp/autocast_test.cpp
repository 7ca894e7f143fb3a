// AutocastGuard: dtypes inside and outside, nesting, rejection, and PyTorch parity; the CPU's emulated-dtype warning.
//
// bf16 and fp16 outputs inside / float32 outside, nesting and restore, dtype rejection, and a Net forward
// bit-identical to Python's torch.autocast("cpu", dtype=torch.bfloat16); the startup warning where the CPU has none
// of a dtype's instructions.
#include "amp/autocast.h"
#include "config/config.h"
#include "checkpoint/state_dict.h"
#include "models/classifier.h"
#include "tests/support/test_support.h"

#include <ATen/autocast_mode.h>
#include <ATen/cpu/Utils.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ddp::test {
namespace {

torch::Tensor conv_out(const torch::Tensor& x, const torch::Tensor& w) { return torch::conv2d(x, w); }

// Nesting is balanced when a fresh increment brings it to exactly 1.
int nesting_after_increment() {
  const int n = at::autocast::increment_nesting();
  at::autocast::decrement_nesting();
  return n;
}

TEST(AutocastTest, CpuBf16ConvAndLinearOutputsBf16InsideFloat32Outside) {
  const auto x = torch::randn({2, 3, 8, 8});
  const auto w = torch::randn({4, 3, 3, 3});
  const auto a = torch::randn({5, 6});
  const auto lw = torch::randn({7, 6});
  {
    AutocastGuard guard(torch::kCPU, true, torch::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(conv_out(x, w).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(torch::linear(a, lw).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(conv_out(x, w).scalar_type(), torch::kFloat);
  EXPECT_EQ(torch::linear(a, lw).scalar_type(), torch::kFloat);
  EXPECT_EQ(nesting_after_increment(), 1);
}

TEST(AutocastTest, NestedDisabledRegionAndRestoreOfPreviousState) {
  const auto a = torch::randn({5, 6});
  const auto b = torch::randn({6, 4});
  const auto dtype_before = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
  const bool cache_before = at::autocast::is_autocast_cache_enabled();
  {
    AutocastGuard outer(torch::kCPU, true, torch::kBFloat16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      AutocastGuard inner(torch::kCPU, false, torch::kBFloat16);
      EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
      {
        AutocastGuard innermost(torch::kCPU, true, torch::kBFloat16);
        EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
      }
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(at::autocast::get_autocast_dtype(c10::DeviceType::CPU), dtype_before);
  EXPECT_EQ(at::autocast::is_autocast_cache_enabled(), cache_before);
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  EXPECT_EQ(nesting_after_increment(), 1);
}

TEST(AutocastTest, StateRestoredWhenAnExceptionUnwindsTheRegion) {
  try {
    AutocastGuard guard(torch::kCPU, true, torch::kBFloat16);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(nesting_after_increment(), 1);
}

// LibTorch 2.x autocasts CPU ops to fp16 as well (torch.autocast("cpu", torch.float16)); 1.13 refused it.
TEST(AutocastTest, CpuFp16MatmulOutputsHalfInsideFloat32Outside) {
  const auto a = torch::randn({5, 6});
  {
    AutocastGuard guard(torch::kCPU, true, torch::kHalf);
    EXPECT_EQ(at::autocast::get_autocast_dtype(c10::DeviceType::CPU), torch::kHalf);
    EXPECT_EQ(torch::mm(a, a.t()).scalar_type(), torch::kHalf);
  }
  EXPECT_EQ(torch::mm(a, a.t()).scalar_type(), torch::kFloat);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(nesting_after_increment(), 1);
}

TEST(AutocastTest, OtherDtypesAreRejectedWithAClearMessage) {
  try {
    AutocastGuard guard(torch::kCPU, true, torch::kFloat);
    FAIL() << "float32 autocast was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "CPU autocast supports fp16 or bf16, got Float");
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(nesting_after_increment(), 1);
  EXPECT_NO_THROW(AutocastGuard(torch::kCPU, false, torch::kFloat));  // a disabled region checks nothing
}

TEST(AutocastTest, DtypeNames) {
  auto dtype_of = [](const char* name, c10::DeviceType device = c10::DeviceType::CPU) {
    return amp_dtype(*parse_choice<AmpDtype>(name), device);
  };
  EXPECT_EQ(dtype_of("bf16"), torch::kBFloat16);
  EXPECT_EQ(dtype_of("fp16"), torch::kHalf);
  EXPECT_EQ(dtype_of("bfloat16"), torch::kBFloat16);
  EXPECT_EQ(dtype_of("float16"), torch::kHalf);
  // auto: each device's autocast default (torch.get_autocast_dtype("cuda") is float16, "cpu" bfloat16).
  EXPECT_EQ(dtype_of("auto", c10::DeviceType::CUDA), torch::kHalf);
  EXPECT_EQ(dtype_of("auto", c10::DeviceType::CPU), torch::kBFloat16);
  EXPECT_EQ(dtype_of("float16", c10::DeviceType::CPU), torch::kHalf);
  EXPECT_FALSE(parse_choice<AmpDtype>("fp32"));
}

// A CUDA region only flips ATen's CUDA autocast state, which a machine without a GPU can observe and restore.
TEST(AutocastTest, CudaRegionSetsAndRestoresGpuAutocastStateOnly) {
  const auto gpu_dtype_before = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  const auto a = torch::randn({3, 3});
  {
    AutocastGuard guard(torch::Device(torch::kCUDA, 0), true, torch::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
    EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(c10::DeviceType::CUDA), torch::kBFloat16);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);  // CPU tensors are not CUDA-autocast eligible
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
  EXPECT_EQ(at::autocast::get_autocast_dtype(c10::DeviceType::CUDA), gpu_dtype_before);
  EXPECT_EQ(nesting_after_increment(), 1);
}

TEST(AutocastTest, NetForwardBitIdenticalToTorchAutocastCpuBf16) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  for (const std::string format : {"contiguous", "channels_last"}) {
    TempDir dir;
    torch::manual_seed(11);
    ModelConfig cfg;
    cfg.name = ModelChoice{"net"};
    cfg.dropout = 0.0;
    cfg.memory_format = *parse_choice<MemoryFormat>(format);
    auto model = make_model(cfg);
    model->eval();
    const auto x = torch::randn({8, 1, 28, 28});
    save_state_dict(dir / "model.pt", module_state(*model));
    save_state_dict(dir / "input.pt", {{"x", x}});

    const int threads_before = torch::get_num_threads();
    torch::set_num_threads(1);
    torch::Tensor ours, plain;
    {
      torch::NoGradGuard no_grad;
      {
        AutocastGuard guard(torch::kCPU, true, torch::kBFloat16);
        ours = model->forward(x);
      }
      plain = model->forward(x);
    }
    torch::set_num_threads(threads_before);

    auto r = run_command(python() + " " + source_dir() + "/tests/python/grad_scaler_reference.py autocast-forward" +
                         " --model " + dir / "model.pt" + " --input " + dir / "input.pt" + " --out " + dir / "out.pt" +
                         " --memory-format " + format);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto theirs = load_state_dict_file(dir / "out.pt").at(0).second;
    EXPECT_EQ(theirs.scalar_type(), ours.scalar_type()) << format;
    EXPECT_TRUE(torch::equal(ours, theirs))
        << format << ": max diff " << (ours.to(torch::kDouble) - theirs.to(torch::kDouble)).abs().max();
    // And autocast really changed the numbers (a guard that did nothing would pass the equality above only if
    // Python's autocast did nothing too).
    EXPECT_FALSE(torch::equal(ours.to(torch::kFloat), plain)) << format;
  }
}

// Autocast on a CPU with none of a dtype's instructions is warned of, naming them; one of them is enough to be quiet,
// and each dtype has its own.
TEST(AutocastTest, CpuWithoutTheDtypesInstructionsIsWarnedOf) {
  const std::unordered_map<std::string, c10::IValue> none{{"avx2", true}, {"avx512_bf16", false}, {"amx_bf16", false}};
  const std::string bf16 = cpu_autocast_warning(c10::kBFloat16, none);
  EXPECT_EQ(bf16,
            "autocast to bfloat16 on a CPU with none of avx512_bf16, amx_bf16, avx_ne_convert: oneDNN emulates "
            "bfloat16, which can make a step many times slower than in float32 (amp.enabled = false)");
  EXPECT_NE(cpu_autocast_warning(c10::kHalf, none).find("float16 on a CPU with none of avx512_fp16, amx_fp16, "),
            std::string::npos);
  for (const std::string name : {"avx512_bf16", "amx_bf16", "avx_ne_convert"}) {
    auto with = none;
    with[name] = true;
    EXPECT_EQ(cpu_autocast_warning(c10::kBFloat16, with), "") << name;
  }
  auto fp16 = none;
  fp16["avx512_fp16"] = true;
  EXPECT_EQ(cpu_autocast_warning(c10::kHalf, fp16), "");
  EXPECT_EQ(cpu_autocast_warning(c10::kBFloat16, fp16), bf16);
}

// A CPU run under autocast says so at startup exactly where this machine lacks the instructions (cpuinfo's view, as
// ATen reports it); without autocast it never does.
TEST(AutocastTest, CpuRunWarnsOfAnEmulatedDtypeAtStartup) {
  TempDir dir;
  const bool emulated = !cpu_autocast_warning(c10::kBFloat16, at::cpu::get_cpu_capabilities()).empty();
  for (const bool amp : {true, false}) {
    const std::string cfg = write_tiny_job(
        dir, 64, 16, 1,
        {"job.out_dir=" + dir / (amp ? "amp" : "fp32"), "data.batch_size=16", "training.max_steps=1", "dist.device=cpu",
         "amp.dtype=bfloat16", std::string("amp.enabled=") + (amp ? "true" : "false")});
    const CommandResult r = run_command(ddptrain_path() + " " + cfg);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("warning: autocast to bfloat16 on a CPU with none of") != std::string::npos,
              amp && emulated)
        << r.output;
  }
}

}  // namespace
}  // namespace ddp::test
