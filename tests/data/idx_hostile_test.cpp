// Tests: hostile IDX files (gzip bombs with a bad checksum, headers declaring more than the file holds) end in one
// error naming the file, with memory bounded by what the file honestly holds.
#include "data/idx.h"
#include "tests/support/child_run.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

namespace ddp::test {
namespace {

// What read_idx(path) does in a child process: its error, or "read".
ChildRun read_idx_in_child(const std::string& path) {
  return run_in_child([&] {
    read_idx(path);
    return std::string("read");
  });
}

void expect_idx_refused(const ChildRun& run, const std::string& path, const std::string& what) {
  ASSERT_TRUE(run.exited) << "the reader died with signal " << run.signal;
  EXPECT_EQ(run.result.rfind("threw: " + path + ": ", 0), 0u) << run.result;
  EXPECT_NE(run.result.find(what), std::string::npos) << "missing \"" << what << "\" in: " << run.result;
}

// An IDX header (unsigned bytes) for dims, followed by `data`.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string out = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((d >> shift) & 0xff);
  return out + data;
}

TEST(IdxHostile, GzipBombWithABadChecksumPeaksAtItsContentOnce) {
  // 64 MiB of zeros in a ~65 kB gzip whose CRC is wrong. The reader inflated it into the tensor, failed the
  // checksum, then inflated it again into a doubling buffer for the message (a 1.3 MB file peaked at 2.2 GB).
  TempDir dir;
  const int64_t n = int64_t{64} << 20;
  write_idx(dir / "bomb.gz", torch::zeros({n}, torch::kUInt8));
  std::string gz = read_file(dir / "bomb.gz");
  ASSERT_LT(gz.size(), 1u << 20);
  gz[gz.size() - 8] = static_cast<char>(gz[gz.size() - 8] ^ 1);  // CRC32 in the trailer
  write_file(dir / "bomb.gz", gz);
  const ChildRun run = read_idx_in_child(dir / "bomb.gz");
  expect_idx_refused(run, dir / "bomb.gz", "incorrect data check");
  std::cout << "[ measured ] reading a 64 MiB gzip bomb with a bad CRC grew the reader by " << run.peak_growth_mb
            << " MB\n";
  EXPECT_LT(run.peak_growth_mb, 64 * 1.25);
}

TEST(IdxHostile, HeaderDeclaringMoreThanARawFileHoldsFailsBeforeAllocating) {
  // 2^18 x 2^18 bytes (64 GiB) declared over 100 bytes: refused from the file size, nothing allocated.
  TempDir dir;
  write_file(dir / "huge", idx_bytes({1u << 18, 1u << 18}, std::string(100, 'x')));
  const ChildRun run = read_idx_in_child(dir / "huge");
  expect_idx_refused(run, dir / "huge", "truncated IDX data: expected 68719476736 bytes, found 100");
  EXPECT_LT(run.peak_growth_mb, 16);
}

TEST(IdxHostile, HeaderDeclaringMoreThanAGzipCanHoldFailsBeforeAllocating) {
  // The same header gzipped (~100 bytes): deflate cannot expand 100 bytes into 64 GiB.
  TempDir dir;
  write_file(dir / "huge", idx_bytes({1u << 18, 1u << 18}, std::string(100, 'x')));
  const auto r = run_command("gzip -c " + shell_quote(dir / "huge") + " > " + shell_quote(dir / "huge.gz"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const ChildRun run = read_idx_in_child(dir / "huge.gz");
  expect_idx_refused(run, dir / "huge.gz", "more than a gzip file of");
  EXPECT_LT(run.peak_growth_mb, 16);
}

TEST(IdxHostile, FuzzSeedCorpusReads) {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/tests/fuzz/corpus/idx")) {
    if (entry.path().filename().string().rfind("crash-", 0) == 0) continue;  // found by the fuzzer: must fail
    ++seeds;
    EXPECT_NO_THROW(read_idx(entry.path())) << entry.path();
  }
  EXPECT_GE(seeds, 5);
}

}  // namespace
}  // namespace ddp::test
