// Tests: save_state_dict streams exactly the archive torch::pickle_save makes, and a failed write leaves nothing.
#include "checkpoint/state_dict.h"
#include "app/config.h"
#include "models/classifier.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <filesystem>
#include <stdexcept>

namespace ddp::test {
namespace {

TEST(StateDictStream, SameBytesAsPickleSave) {
  TempDir dir;
  for (const std::string name : {"net", "resnet18"}) {
    ModelConfig cfg;
    cfg.name = name;
    torch::manual_seed(1);
    const NamedTensors state = module_state(*make_model(cfg));
    save_state_dict(dir / (name + ".pt"), state);
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [key, t] : state) dict.insert(key, t.detach().cpu().contiguous());
    const std::vector<char> expected = torch::pickle_save(dict);
    EXPECT_EQ(read_file(dir / (name + ".pt")), std::string(expected.begin(), expected.end())) << name;
  }
}

TEST(StateDictStream, FailedProducerLeavesNoFile) {
  TempDir dir;
  write_file(dir / "keep.pt", "earlier");
  EXPECT_THROW(write_file_atomic(dir / "keep.pt",
                                 [](const ByteSink& sink) {
                                   sink("partial", 7);
                                   throw std::runtime_error("disk on fire");
                                 }),
               std::runtime_error);
  EXPECT_EQ(read_file(dir / "keep.pt"), "earlier");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace ddp::test
