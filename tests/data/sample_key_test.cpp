// Per-sample keys and their random bytes: a pure function of the key, any length a prefix of a longer draw, and
// bytes spread evenly.
#include "data/sample_key.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ddp::test {
namespace {

std::vector<uint8_t> bytes_of(uint64_t key, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  fill_random_bytes(key, out.data(), n);
  return out;
}

TEST(SampleKey, KeysDifferByEveryPart) {
  const uint64_t key = sample_key(1, 2, 3);
  EXPECT_EQ(sample_key(1, 2, 3), key);
  EXPECT_NE(sample_key(0, 2, 3), key);
  EXPECT_NE(sample_key(1, 1, 3), key);
  EXPECT_NE(sample_key(1, 2, 4), key);
  EXPECT_NE(sample_key(1, 3, 2), key);  // stream and index are not interchangeable
}

TEST(SampleKey, BytesAreAFunctionOfTheKeyAndAPrefixOfLongerDraws) {
  const std::vector<uint8_t> long_draw = bytes_of(42, 1001);
  EXPECT_EQ(bytes_of(42, 1001), long_draw);
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{500}})
    EXPECT_EQ(bytes_of(42, n), std::vector<uint8_t>(long_draw.begin(), long_draw.begin() + n)) << n;
  EXPECT_NE(bytes_of(43, 1001), long_draw);
  // fill_random_bytes writes exactly n bytes.
  std::vector<uint8_t> guarded(12, 0xAB);
  fill_random_bytes(42, guarded.data() + 1, 9);
  EXPECT_EQ(guarded[0], 0xAB);
  EXPECT_EQ(guarded[10], 0xAB);
}

// Each byte value about equally often, and neighbouring keys' draws unrelated (their bytes agree about 1 time in 256).
TEST(SampleKey, BytesAreEvenlySpread) {
  constexpr int64_t kN = 1 << 20;
  const std::vector<uint8_t> a = bytes_of(sample_key(7, 0, 0), kN), b = bytes_of(sample_key(7, 0, 1), kN);
  std::vector<double> count(256, 0);
  int64_t equal = 0;
  for (int64_t i = 0; i < kN; ++i) {
    ++count[a[static_cast<size_t>(i)]];
    equal += a[static_cast<size_t>(i)] == b[static_cast<size_t>(i)];
  }
  double chi2 = 0;
  const double expected = kN / 256.0;
  for (const double c : count) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 350);  // 255 degrees of freedom: p < 1e-4 above this
  EXPECT_NEAR(static_cast<double>(equal), expected, 5 * std::sqrt(expected));
}

}  // namespace
}  // namespace ddp::test
