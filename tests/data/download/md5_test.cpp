// Tests for the MD5 used by data.download: whole, chunked and file digests against Python's hashlib.
#include "data/download/md5.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp {
namespace {

using namespace ddp::test;

// hashlib.md5 hex digest of each file, in order.
std::vector<std::string> hashlib_md5(const std::vector<std::string>& paths) {
  std::string cmd =
      shell_quote(python()) +
      " -c 'import hashlib,sys\nfor p in sys.argv[1:]: print(hashlib.md5(open(p,\"rb\").read()).hexdigest())'";
  for (const auto& p : paths) cmd += " " + shell_quote(p);
  CommandResult r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> digests;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) digests.push_back(line);
  EXPECT_EQ(digests.size(), paths.size()) << r.output;
  digests.resize(paths.size());
  return digests;
}

TEST(DownloadMd5, MatchesHashlibAcrossBlockBoundariesAndChunkings) {
  TempDir tmp;
  std::vector<std::string> inputs = {"", "a", "abc", "message digest", "abcdefghijklmnopqrstuvwxyz"};
  std::mt19937 gen(7);
  for (size_t n : {55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000, 100003}) {
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(gen() & 0xff);
    inputs.push_back(bytes);
  }
  std::vector<std::string> paths;
  for (size_t i = 0; i < inputs.size(); ++i) {
    paths.push_back(tmp / ("in" + std::to_string(i)));
    write_file(paths.back(), inputs[i]);
  }
  std::vector<std::string> expected = hashlib_md5(paths);
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i) + " of " + std::to_string(inputs[i].size()) + " bytes");
    EXPECT_EQ(md5_hex(inputs[i]), expected[i]);
    EXPECT_EQ(md5_file_hex(paths[i]), expected[i]);
    for (size_t chunk : {1, 7, 63, 64, 65, 4096}) {
      Md5 md5;
      for (size_t at = 0; at < inputs[i].size(); at += chunk)
        md5.update(inputs[i].data() + at, std::min(chunk, inputs[i].size() - at));
      EXPECT_EQ(md5.hex_digest(), expected[i]) << "chunks of " << chunk;
    }
  }
}

TEST(DownloadMd5, MatchesHashlibOnMnistFixtureFiles) {
  std::vector<std::string> paths;
  if (std::filesystem::is_directory(mnist_fixture_dir()))
    for (const auto& entry : std::filesystem::directory_iterator(mnist_fixture_dir())) paths.push_back(entry.path());
  ASSERT_FALSE(paths.empty()) << "no files in " << mnist_fixture_dir();
  std::vector<std::string> expected = hashlib_md5(paths);
  for (size_t i = 0; i < paths.size(); ++i) EXPECT_EQ(md5_file_hex(paths[i]), expected[i]) << paths[i];
}

TEST(DownloadMd5, UnreadableFileIsNamed) {
  TempDir tmp;
  try {
    md5_file_hex(tmp / "absent.gz");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp / "absent.gz"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp
