// Tests: save_state_dict streams exactly the archive torch_save_bytes makes (torch::pickle_save's without type tags),
// and a failed write leaves nothing.
#include "checkpoint/state_dict.h"
#include "checkpoint/torch_save/pickle_reader.h"
#include "config/config.h"
#include "models/classifier.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <filesystem>
#include <stdexcept>

namespace ddp::test {
namespace {

TEST(StateDictStream, SameBytesAsTheInMemoryArchive) {
  TempDir dir;
  for (const std::string name : {"net", "resnet18"}) {
    ModelConfig cfg;
    cfg.name = ModelChoice{name};
    torch::manual_seed(1);
    const NamedTensors state = module_state(*make_model(cfg));
    save_state_dict(dir / (name + ".pt"), state);
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [key, t] : state) dict.insert(key, t.detach().cpu().contiguous());
    const std::vector<char> expected = torch_save_bytes(dict);
    EXPECT_EQ(read_file(dir / (name + ".pt")), std::string(expected.begin(), expected.end())) << name;
  }
}

// torch::pickle_save tags typed dicts with torch.jit._pickle.restore_type_tag, which torch.load(weights_only=True)
// refuses; ddptrain's archives carry no tag and are otherwise written the same way.
TEST(StateDictStream, ArchivesCarryNoTypeTags) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("w", torch::ones({2}));
  const std::vector<char> tagged = torch::pickle_save(dict), plain = torch_save_bytes(dict);
  const std::string tag = "restore_type_tag";
  EXPECT_NE(std::string(tagged.begin(), tagged.end()).find(tag), std::string::npos);
  EXPECT_EQ(std::string(plain.begin(), plain.end()).find(tag), std::string::npos);
}

// On CUDA the model is stored channels_last (and so are its momentum buffers): the archive keeps each tensor's
// strides, as torch.save does, and reads back to the same values.
TEST(StateDictStream, ChannelsLastTensorsReadBackEqual) {
  torch::manual_seed(2);
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("conv", torch::randn({4, 3, 3, 3}).contiguous(torch::MemoryFormat::ChannelsLast));
  dict.insert("stem", torch::randn({4, 1, 5, 5}).clone(torch::MemoryFormat::ChannelsLast));
  const c10::impl::GenericDict back = read_torch_save(torch_save_bytes(dict)).toGenericDict();
  ASSERT_EQ(back.size(), 2u);
  for (const auto& entry : dict) {
    const at::Tensor t = back.at(entry.key()).toTensor();
    EXPECT_TRUE(torch::equal(t, entry.value())) << entry.key();
    EXPECT_EQ(t.strides(), entry.value().strides()) << entry.key();
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
