// choose_placement: dist.device / dist.backend against the build and the GPUs visible (the count is the test's).
#include "distributed/placement.h"

#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

DistConfig dist_config(const std::string& device, const std::string& backend) {
  DistConfig cfg;
  cfg.device = *parse_choice<DeviceChoice>(device);
  cfg.backend = *parse_choice<BackendChoice>(backend);
  return cfg;
}

std::string placement_error(const DistConfig& cfg, int64_t local_rank, int64_t local_world, bool cuda, int64_t gpus) {
  try {
    choose_placement(cfg, local_rank, local_world, cuda, gpus);
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for device " << choice_name(cfg.device) << " backend " << choice_name(cfg.backend)
                << " gpus " << gpus;
  return "";
}

TEST(Placement, AutoIsCudaLocalRankWithNcclWhereAGpuIsVisibleElseCpuWithGloo) {
  const Placement gpu = choose_placement(dist_config("auto", "auto"), 1, 2, true, 2);
  EXPECT_EQ(gpu.device, torch::Device(torch::kCUDA, 1));
  EXPECT_EQ(gpu.backend, "nccl");
  for (const auto& [cuda, gpus] : std::vector<std::pair<bool, int64_t>>{{true, 0}, {false, 0}, {false, 4}}) {
    const Placement cpu = choose_placement(dist_config("auto", "auto"), 1, 2, cuda, gpus);
    EXPECT_EQ(cpu.device, torch::Device(torch::kCPU));
    EXPECT_EQ(cpu.backend, "gloo");
  }
  // dist.device = cpu keeps a GPU machine on the CPU, with Gloo.
  const Placement forced = choose_placement(dist_config("cpu", "auto"), 0, 1, true, 8);
  EXPECT_EQ(forced.device, torch::Device(torch::kCPU));
  EXPECT_EQ(forced.backend, "gloo");
}

TEST(Placement, CudaWithoutAGpuOrWithoutACudaBuildIsAClearError) {
  EXPECT_NE(placement_error(dist_config("cuda", "auto"), 0, 1, true, 0)
                .find("needs CUDA device cuda:0 (LOCAL_RANK 0) but no CUDA device is visible"),
            std::string::npos);
  EXPECT_NE(placement_error(dist_config("auto", "nccl"), 3, 4, true, 0).find("needs CUDA device cuda:3 (LOCAL_RANK 3)"),
            std::string::npos);
  EXPECT_NE(placement_error(dist_config("cuda", "gloo"), 0, 1, false, 0).find("needs a CUDA build of ddptrain"),
            std::string::npos);
  EXPECT_NE(placement_error(dist_config("auto", "nccl"), 0, 1, false, 0).find("needs a CUDA build of ddptrain"),
            std::string::npos);
}

// dist.device = cpu with dist.backend = nccl fails at load (config_test); what only the machine decides fails here.
TEST(Placement, ShmAllreduceWhereAutoChoseNcclIsAConfigError) {
  DistConfig shm = dist_config("auto", "auto");
  shm.allreduce = AllreducePath::Shm;
  EXPECT_THROW(choose_placement(shm, 0, 1, true, 1), ConfigError);
  EXPECT_EQ(choose_placement(shm, 0, 1, true, 0).backend, "gloo");  // no GPU: auto is gloo, where shm belongs
}

TEST(Placement, MoreLocalRanksThanGpusIsAnErrorForNcclAndSharedGpusForGloo) {
  const std::string e = placement_error(dist_config("auto", "auto"), 2, 4, true, 2);
  EXPECT_NE(e.find("LOCAL_RANK 2 of 4 local ranks has no GPU of its own (2 visible"), std::string::npos) << e;
  EXPECT_NE(e.find("start at most 2 ranks per node"), std::string::npos) << e;
  // Gloo carries CUDA tensors of ranks that share a GPU (NCCL refuses two ranks on one device).
  const Placement shared = choose_placement(dist_config("cuda", "gloo"), 1, 2, true, 1);
  EXPECT_EQ(shared.device, torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(shared.backend, "gloo");
  const Placement third = choose_placement(dist_config("cuda", "gloo"), 2, 3, true, 2);
  EXPECT_EQ(third.device, torch::Device(torch::kCUDA, 0));
}

}  // namespace
}  // namespace ddp::test
