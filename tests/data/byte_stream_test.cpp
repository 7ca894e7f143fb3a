// Tests: ByteStream returns exactly what gzip -d returns (members, padding, chunk boundaries) and fails on bad data.
#include "data/byte_stream.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace ddp {
namespace {

// 3 MiB of mixed content (runs and noise) so members span several 1 MiB input chunks once compressed.
std::string sample_bytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i / 97) % 7 == 0 ? gen() & 0xff : (i / 1000) & 0xff);
  return s;
}

std::string read_all(const std::string& path, bool* failed, size_t step = 12345) {
  ByteStream in(path);
  std::string out;
  std::vector<uint8_t> buf(step);
  while (size_t n = in.read(buf.data(), buf.size())) out.append(reinterpret_cast<char*>(buf.data()), n);
  *failed = in.failed();
  return out;
}

std::string gzip(const test::TempDir& dir, const std::string& name, const std::string& content) {
  test::write_file(dir / name, content);
  auto r = test::run_command("gzip -kf6 " + test::shell_quote(dir / name));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return test::read_file(dir / (name + ".gz"));
}

TEST(ByteStream, RawAndGzipGiveTheFileContents) {
  test::TempDir dir;
  const std::string a = sample_bytes(3 << 20, 1);
  gzip(dir, "a", a);
  bool failed = true;
  EXPECT_EQ(read_all(dir / "a", &failed), a);
  EXPECT_FALSE(failed);
  EXPECT_EQ(read_all(dir / "a.gz", &failed), a);
  EXPECT_FALSE(failed);
  EXPECT_EQ(read_all(dir / "a.gz", &failed, 1 << 22),
            a);  // one read larger than everything
  EXPECT_FALSE(failed);
}

TEST(ByteStream, MembersAndZeroPaddingAreRead) {
  test::TempDir dir;
  const std::string a = sample_bytes(1500000, 2), b = sample_bytes(700000, 3);
  const std::string joined = gzip(dir, "a", a) + gzip(dir, "b", b) + std::string(5, '\0');
  test::write_file(dir / "joined.gz", joined);
  bool failed = true;
  EXPECT_EQ(read_all(dir / "joined.gz", &failed), a + b);
  EXPECT_FALSE(failed);
  ByteStream in(dir / "joined.gz");
  std::vector<uint8_t> head(10);
  EXPECT_EQ(in.read(head.data(), head.size()), 10u);
  EXPECT_EQ(in.skip_rest(), a.size() + b.size() - 10);
  EXPECT_FALSE(in.failed());
}

TEST(ByteStream, BadDataSetsFailed) {
  test::TempDir dir;
  const std::string gz = gzip(dir, "a", sample_bytes(400000, 4));
  std::string corrupt = gz;
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
  std::string bad_crc = gz;
  bad_crc[gz.size() - 6] = static_cast<char>(bad_crc[gz.size() - 6] ^ 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", gz.substr(0, gz.size() / 2)},
      {"no trailer", gz.substr(0, gz.size() - 4)},
      {"trailing garbage", gz + "xyz"},
      {"corrupt", corrupt},
      {"bad crc", bad_crc},
  };
  for (const auto& [name, bytes] : cases) {
    test::write_file(dir / "bad.gz", bytes);
    bool failed = false;
    read_all(dir / "bad.gz", &failed);
    EXPECT_TRUE(failed) << name;
  }
  bool failed = false;
  read_all(dir / "missing", &failed);
  EXPECT_TRUE(failed) << "missing file";
}

}  // namespace
}  // namespace ddp
