// Batch rows: a sample written into its row in every pairing of the sample's and the batch's layouts is ATen's
// v2.ToDtype(scale=True) + v2.Normalize of it (or the sample itself, uint8), bit for bit; the other rows untouched.
#include "data/batch_rows.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace ddp::test {
namespace {

// v2.Normalize(v2.ToDtype(image, float32, scale=True), mean, std) as ATen computes it: one float32 division by 255,
// then (x - mean) / std per channel.
torch::Tensor normalized_by_aten(const torch::Tensor& image, const PerChannel& mean, const PerChannel& std) {
  auto column = [&](const PerChannel& v) {
    return torch::tensor(std::vector<float>(v.begin(), v.end()), torch::kFloat32).view({-1, 1, 1});
  };
  return (image.to(torch::kFloat32) / 255.0f - column(mean)) / column(std);
}

// Sample layouts write_row meets: channels first, a channels_last image (a resize's output), a crop of one (its rows
// longer than the crop), and a crop of a channels-first image.
std::vector<std::pair<std::string, torch::Tensor>> sample_layouts(int64_t channels, int64_t height, int64_t width) {
  const torch::Tensor big = torch::randint(0, 256, {height + 3, width + 5, channels}, torch::kUInt8);
  const torch::Tensor hwc = big.slice(0, 0, height).slice(1, 0, width).contiguous();
  return {
      {"channels first", hwc.permute({2, 0, 1}).contiguous()},
      {"channels last", hwc.permute({2, 0, 1})},
      {"a crop of a channels-last image", big.slice(0, 2, 2 + height).slice(1, 3, 3 + width).permute({2, 0, 1})},
      {"a crop of a channels-first image",
       big.permute({2, 0, 1}).contiguous().slice(1, 1, 1 + height).slice(2, 4, 4 + width)},
  };
}

TEST(BatchRows, ARowIsTheSampleNormalisedInEveryLayoutPairing) {
  torch::manual_seed(0);
  const PerChannel mean3{0.485, 0.456, 0.406}, std3{0.229, 0.224, 0.225};
  struct Case {
    int64_t channels;
    PerChannel mean, std;
  };
  for (const Case& c : {Case{3, mean3, std3}, Case{1, {0.5}, {0.25}}, Case{3, {0.5}, {0.5}}}) {
    const NormalizeTable table(c.mean, c.std);
    for (const auto& [layout, sample] : sample_layouts(c.channels, 7, 9)) {
      for (const auto format : {at::MemoryFormat::Contiguous, at::MemoryFormat::ChannelsLast}) {
        const std::string what = std::to_string(c.channels) + " channels, " + layout + ", batch " +
                                 (format == at::MemoryFormat::ChannelsLast ? "channels_last" : "channels first");
        SCOPED_TRACE(what);
        const torch::Tensor batch = torch::full({3, c.channels, 7, 9}, -7.0f).contiguous(format);
        write_row(batch, 1, sample.data_ptr<uint8_t>(), sample.sizes(), sample.strides(), &table);
        EXPECT_TRUE(torch::equal(batch[1], normalized_by_aten(sample, c.mean, c.std)));
        EXPECT_TRUE(batch[0].eq(-7.0f).all().item<bool>());
        EXPECT_TRUE(batch[2].eq(-7.0f).all().item<bool>());

        const torch::Tensor bytes = torch::full({2, c.channels, 7, 9}, 3, torch::kUInt8).contiguous(format);
        write_row(bytes, 0, sample.data_ptr<uint8_t>(), sample.sizes(), sample.strides(), nullptr);
        EXPECT_TRUE(torch::equal(bytes[0], sample));
        EXPECT_TRUE(bytes[1].eq(3).all().item<bool>());
      }
    }
  }
}

TEST(BatchRows, ASampleOfAnotherShapeIsRefused) {
  const torch::Tensor batch = torch::zeros({2, 3, 4, 4});
  const torch::Tensor sample = torch::zeros({3, 4, 5}, torch::kUInt8);
  const NormalizeTable table({0.5}, {0.5});
  EXPECT_THROW(write_row(batch, 0, sample.data_ptr<uint8_t>(), sample.sizes(), sample.strides(), &table), c10::Error);
}

}  // namespace
}  // namespace ddp::test
