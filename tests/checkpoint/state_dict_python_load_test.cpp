// Tests: state dicts written by Python's torch.save (OrderedDict, dict, views, dtypes) load bit for bit and apply.
#include "config/config.h"
#include "checkpoint/state_dict.h"
#include "models/classifier.h"
#include "tests/checkpoint/state_dict_oracle.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

// Python saves KIND with `options`; returns what it dumped and what load_state_dict_file read.
std::pair<NamedTensors, NamedTensors> python_save_then_load(const TempDir& dir, const std::string& kind,
                                                            const std::string& options = "") {
  run_oracle("save " + kind + " " + shell_quote(dir / "sd.pt") + " " + shell_quote(dir / "sd") + " " + options);
  return {read_dump(dir / "sd"), load_state_dict_file(dir / "sd.pt")};
}

TEST(StateDictPythonLoad, ResNet18OrderedDictLoadsBitExact) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "resnet18");
  ASSERT_EQ(loaded.size(), 122u);  // 62 parameters, 60 BN buffers incl. int64 num_batches_tracked
  EXPECT_EQ(bitwise_difference(expected, loaded), "");
  EXPECT_EQ(entry(loaded, "bn1.num_batches_tracked").scalar_type(), at::kLong);
  EXPECT_EQ(entry(loaded, "bn1.num_batches_tracked").item<int64_t>(), 1);
}

TEST(StateDictPythonLoad, ResNet18PlainDictLoadsBitExact) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "resnet18", "--plain --seed 7");
  EXPECT_EQ(bitwise_difference(expected, loaded), "");
}

TEST(StateDictPythonLoad, NetOrderedDictLoadsBitExact) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "net", "--seed 3");
  ASSERT_EQ(loaded.size(), 8u);
  EXPECT_EQ(bitwise_difference(expected, loaded), "");
}

TEST(StateDictPythonLoad, PickleProtocol4LoadsBitExact) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "tensors", "--protocol 4");
  EXPECT_EQ(bitwise_difference(expected, loaded), "");
}

TEST(StateDictPythonLoad, ViewsSharedStoragesAndEveryDtypeLoadBitExact) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "tensors", "--seed 5");
  EXPECT_EQ(bitwise_difference(expected, loaded), "");
  // Like torch.load: views keep their offset and strides over the one storage they share.
  const at::Tensor &base = entry(loaded, "base"), &slice = entry(loaded, "slice");
  EXPECT_TRUE(slice.is_alias_of(base));
  EXPECT_EQ(slice.storage_offset(), 9);
  EXPECT_EQ(slice.strides(), at::IntArrayRef({7, 1}));
  EXPECT_EQ(entry(loaded, "transposed").strides(), at::IntArrayRef({1, 7}));
  EXPECT_EQ(entry(loaded, "every_other").strides(), at::IntArrayRef({7, 2}));
  EXPECT_EQ(entry(loaded, "row").storage_offset(), 35);
  EXPECT_EQ(entry(loaded, "double_view").storage_offset(), 11);
  EXPECT_EQ(entry(loaded, "int64_scalar").dim(), 0);
}

TEST(StateDictPythonLoad, OrderedDictAppliesIntoOurResNet18) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "resnet18", "--seed 11");
  ModelConfig cfg;
  cfg.name = ModelChoice{"resnet18"};
  auto model = make_model(cfg);
  apply_state(*model, loaded, dir / "sd.pt");
  EXPECT_EQ(bitwise_difference(expected, module_state(*model)), "");
}

TEST(StateDictPythonLoad, OrderedDictAppliesIntoOurNet) {
  SKIP_WITHOUT_PYTHON_TORCH();
  TempDir dir;
  auto [expected, loaded] = python_save_then_load(dir, "net", "--seed 12");
  ModelConfig cfg;
  cfg.name = ModelChoice{"net"};
  auto model = make_model(cfg);
  apply_state(*model, loaded, dir / "sd.pt");
  EXPECT_EQ(bitwise_difference(expected, module_state(*model)), "");
}

}  // namespace
}  // namespace ddp::test
