// Tests: an HTTP shard's samples through ShardRuns are the file's bytes whatever the order and the threads asking,
// each run asked for with one Range request, once; a run told as coming is read ahead (and kept when the server loses
// the file after), at most `max_ahead` at once; a run that cannot be read is one line naming the shard; a local
// shard's run cut short gives the samples before the cut.
#include "data/shard_runs.h"
#include "data/storage_error.h"
#include "tests/support/nginx_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace ddp::test {
namespace {

// A shard of seeded random bytes and an index of samples of 20-400 KB with gaps of 512 bytes (a tar header's) between
// them, up to about `bytes`.
std::pair<std::string, ShardIndex> random_shard(int64_t bytes, uint32_t seed) {
  std::mt19937 gen(seed);
  ShardIndex index;
  int64_t at = 512;
  while (true) {
    const int64_t length = 20000 + static_cast<int64_t>(gen() % 380000);
    if (at + length > bytes) break;
    index.offsets.push_back(at);
    index.lengths.push_back(length);
    at += length + 512;
  }
  std::string data(static_cast<size_t>(at), '\0');
  for (char& c : data) c = static_cast<char>(gen() & 0xff);
  index.shard_bytes = at;
  return {data, index};
}

// Sample i's bytes in the shard `data`.
std::string bytes_of_sample(const std::string& data, const ShardIndex& index, int64_t i) {
  return data.substr(static_cast<size_t>(index.offsets[static_cast<size_t>(i)]),
                     static_cast<size_t>(index.lengths[static_cast<size_t>(i)]));
}

// The Range headers of the requests for `uri` nginx answered with 206, as "bytes=FIRST-LAST", in order.
std::vector<std::string> ranges_served(const NginxServer& nginx, const std::string& uri) {
  std::vector<std::string> out;
  std::istringstream lines(nginx.requests());
  for (std::string method, path, status, sent, connection, range;
       lines >> method >> path >> status >> sent >> connection >> range;)
    if (path == uri && status == "206") out.push_back(range);
  return out;
}

std::string range_of_run(const ShardIndex& index, const std::vector<int64_t>& runs, size_t r) {
  const int64_t first = runs[r], last = (r + 1 < runs.size() ? runs[r + 1] : index.size()) - 1;
  return "bytes=" + std::to_string(index.offsets[static_cast<size_t>(first)]) + "-" +
         std::to_string(index.offsets[static_cast<size_t>(last)] + index.lengths[static_cast<size_t>(last)] - 1);
}

// Waits (up to 10 s) until nginx has answered `count` requests for `uri`.
void wait_for_requests(const NginxServer& nginx, const std::string& uri, size_t count) {
  for (int i = 0; i < 100 && ranges_served(nginx, uri).size() < count; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

std::string missing_for_runs() {
  if (!built_with_libcurl()) return "built without libcurl";
  if (!have_nginx()) return "nginx absent";
  return "";
}

TEST(ShardRuns, EverySampleIsTheFilesBytesAndEachRunIsAskedForOnceWhateverTheOrderAndThreads) {
  if (const std::string why = missing_for_runs(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const auto shard_bytes = random_shard(9 << 20, 7);
  const std::string& data = shard_bytes.first;  // references, not bindings: the lambdas below capture them
  const ShardIndex& index = shard_bytes.second;
  write_file(dir / "www/a.tar", data);
  NginxServer nginx(dir / "www");
  const std::vector<int64_t> runs = range_runs(index);
  ASSERT_GE(runs.size(), 4u);
  EXPECT_EQ(runs.front(), 0);
  for (size_t r = 0; r < runs.size(); ++r) {  // at most 2 MiB a run, and no run could take its next sample too
    const int64_t first = runs[r], end = r + 1 < runs.size() ? runs[r + 1] : index.size();
    const auto span = [&](int64_t last) {
      return index.offsets[static_cast<size_t>(last)] + index.lengths[static_cast<size_t>(last)] -
             index.offsets[static_cast<size_t>(first)];
    };
    EXPECT_LE(span(end - 1), int64_t{2} << 20) << r;
    if (end < index.size()) {
      EXPECT_GT(span(end), int64_t{2} << 20) << r;
    }
  }
  const std::string url = nginx.url() + "a.tar";
  const RangedShard shard{url, index, runs};
  std::vector<int64_t> order(static_cast<size_t>(index.size()));
  for (int64_t i = 0; i < index.size(); ++i) order[static_cast<size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  ShardRuns reader(ShardFetch{0, 0.01, 0.05}, 2, 2, 1000);
  // As a loader does: samples handed out in order under a lock, which tells the 8 after the next 8 every 8 samples.
  std::mutex mu;
  size_t next = 0;
  std::vector<std::string> got(order.size());
  const auto work = [&] {
    for (;;) {
      size_t k;
      {
        std::lock_guard<std::mutex> lock(mu);
        if ((k = next++) >= order.size()) return;
        for (size_t t = k + 8; k % 8 == 0 && t < std::min(order.size(), k + 16); ++t) reader.coming(0, shard, order[t]);
      }
      got[k] = reader.sample(0, shard, order[k]);
    }
  };
  std::thread other(work);
  work();
  other.join();
  for (size_t k = 0; k < order.size(); ++k)
    ASSERT_EQ(got[k], bytes_of_sample(data, index, order[k])) << "sample " << order[k];
  std::vector<std::string> served = ranges_served(nginx, "/a.tar"), expected;
  for (size_t r = 0; r < runs.size(); ++r) expected.push_back(range_of_run(index, runs, r));
  std::sort(served.begin(), served.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(served, expected) << nginx.requests();
}

TEST(ShardRuns, ARunToldAsComingIsReadAheadAtMostMaxAheadAtOnceAndAFailedOneNamesTheShard) {
  if (const std::string why = missing_for_runs(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const auto shard_bytes = random_shard(9 << 20, 11);
  const std::string& data = shard_bytes.first;
  const ShardIndex& index = shard_bytes.second;
  write_file(dir / "www/b.tar", data);
  NginxServer nginx(dir / "www", "limit_rate 4m;");  // a run takes up to half a second
  const std::vector<int64_t> runs = range_runs(index);
  ASSERT_GE(runs.size(), 4u);
  const std::string url = nginx.url() + "b.tar";
  const RangedShard shard{url, index, runs};
  const auto bytes_of = [&](int64_t i) { return bytes_of_sample(data, index, i); };
  {
    // One read ahead at a time: runs 1 and 2 told together, only run 1 is read; told again once run 1 is in, run 2
    // is.
    ShardRuns reader(ShardFetch{0, 0.01, 0.05}, 2, 1, 100);
    reader.coming(0, shard, runs[1]);
    reader.coming(0, shard, runs[2]);
    wait_for_requests(nginx, "/b.tar", 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(ranges_served(nginx, "/b.tar"), std::vector<std::string>{range_of_run(index, runs, 1)});
    reader.coming(0, shard, runs[2]);
    wait_for_requests(nginx, "/b.tar", 2);
    // The server loses the shard: the runs read ahead still give their samples; run 0, never told, fails naming the
    // shard and the bytes.
    std::filesystem::remove(dir / "www/b.tar");
    EXPECT_EQ(reader.sample(0, shard, runs[1]), bytes_of(runs[1]));
    EXPECT_EQ(reader.sample(0, shard, runs[2] + 1), bytes_of(runs[2] + 1));
    EXPECT_EQ(reader.sample(0, shard, runs[2]), bytes_of(runs[2]));
    try {
      reader.sample(0, shard, 1);
      ADD_FAILURE() << "run 0 read from a shard the server no longer has";
    } catch (const StorageError& e) {
      EXPECT_NE(std::string(e.what()).find("shard " + url), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("404"), std::string::npos) << e.what();
    }
    // Back on the server: the failed run is read again when asked for.
    write_file(dir / "www/b.tar", data);
    EXPECT_EQ(reader.sample(0, shard, 1), bytes_of(1));
    EXPECT_EQ(reader.sample(0, shard, 0), bytes_of(0));
  }
  const std::vector<std::string> served = ranges_served(nginx, "/b.tar");
  EXPECT_EQ(served, (std::vector<std::string>{range_of_run(index, runs, 1), range_of_run(index, runs, 2),
                                              range_of_run(index, runs, 0)}))
      << nginx.requests();
}

// A local shard is read a run at a time too; when a run cannot be read whole (the file cut short since it was
// indexed), its samples that lie before the cut are each read alone, and the one past it fails naming the shard.
TEST(ShardRuns, ALocalShardsDamagedRunFallsBackToItsIntactSamples) {
  TempDir dir;
  const auto shard_bytes = random_shard(5 << 20, 13);
  const std::string& data = shard_bytes.first;
  const ShardIndex& index = shard_bytes.second;
  const std::string path = dir / "c.tar";
  write_file(path, data);
  const std::vector<int64_t> runs = range_runs(index);
  ASSERT_GE(runs.size(), 2u);
  ASSERT_GE(runs[2] - runs[1], 2);  // run 1 holds two samples at least
  const RangedShard shard{path, index, runs};
  const auto bytes_of = [&](int64_t i) { return bytes_of_sample(data, index, i); };
  ShardRuns reader(ShardFetch{0, 0.01, 0.05}, 2, 2, 100);
  reader.coming(0, shard, runs[0]);
  for (int64_t i = runs[0]; i < runs[1]; ++i) ASSERT_EQ(reader.sample(0, shard, i), bytes_of(i)) << i;
  // Cut inside run 1's last sample.
  const int64_t last = runs[2] - 1;
  std::filesystem::resize_file(path, static_cast<uintmax_t>(index.offsets[static_cast<size_t>(last)] + 100));
  for (int64_t i = runs[1]; i < last; ++i) EXPECT_EQ(reader.sample(0, shard, i), bytes_of(i)) << i;
  try {
    reader.sample(0, shard, last);
    ADD_FAILURE() << "a sample past the end of the file was read";
  } catch (const StorageError& e) {
    ADD_FAILURE() << "a damaged local shard is not the server failing: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("shard " + path + ": cannot read"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp::test
