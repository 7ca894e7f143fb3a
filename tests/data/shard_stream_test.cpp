// Tests: a shard read front to back from a pipe: command, over HTTP or decompressed: its bytes are the file's, a
// command's exit status, an HTTP error and an early end are one line naming the shard, a command still writing is
// stopped when the stream is dropped; where a pipe: shard's index is read.
#include "data/shard_source.h"
#include "data/shard_stream.h"
#include "data/storage_error.h"
#include "tests/support/nginx_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>

namespace ddp::test {
namespace {

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const StorageError& e) {
    return e.what();
  }
  return "";
}

// `source` read as a stream of `bytes`: 1000 bytes after 5000 skipped, then the rest, each as the file holds them.
void expect_stream_of(const std::string& source, bool compressed, const std::string& bytes) {
  ShardStream s(source, compressed);
  std::string got(1000, '\0');
  s.skip(5000);
  s.read(got.data(), got.size());
  EXPECT_EQ(got, bytes.substr(5000, 1000)) << source;
  EXPECT_EQ(s.position(), 6000) << source;
  EXPECT_EQ(s.rest(1 << 20), bytes.substr(6000)) << source;
}

TEST(ShardStream, APipeShardsIndexIsTheSameCommandWithItsTarWordFollowedByDdpidx) {
  EXPECT_EQ(index_source("pipe:aws s3 cp s3://b/train-0001.tar -"), "pipe:aws s3 cp s3://b/train-0001.tar.ddpidx -");
  EXPECT_EQ(index_source("pipe:curl -s -L https://h/d/val-{0..1}.tar.gz"),
            "pipe:curl -s -L https://h/d/val-{0..1}.tar.gz.ddpidx");
  EXPECT_EQ(index_source("pipe:cat /a.tar/x.tar  "), "pipe:cat /a.tar/x.tar.ddpidx  ");  // the last such word
  EXPECT_EQ(index_source("pipe:tar.sh x.tar y"), "pipe:tar.sh x.tar.ddpidx y");
  EXPECT_EQ(index_source("/data/a.tar"), "/data/a.tar.ddpidx");
  EXPECT_EQ(index_source("http://h/a.tar"), "http://h/a.tar.ddpidx");
  EXPECT_EQ(index_source("https://h/d/a.tar?token=x.tar&b=1#f"), "https://h/d/a.tar.ddpidx?token=x.tar&b=1#f");
  EXPECT_EQ(index_source("https://h/a.tar#part"), "https://h/a.tar.ddpidx#part");
  EXPECT_THROW(index_source("pipe:gsutil cat gs://b/shard-0001"), std::invalid_argument);
}

TEST(ShardStream, ReadsAFileOrACommandsOutputDecompressedAndChecksHowTheCommandEnded) {
  TempDir dir;
  std::mt19937 gen(3);
  std::string bytes(100000, '\0');
  for (char& c : bytes) c = static_cast<char>(gen() % 7);  // compressible
  write_file(dir / "a.tar", bytes);
  ASSERT_EQ(run_command("gzip -k " + dir / "a.tar" + " && xz -k " + dir / "a.tar").exit_code, 0);
  for (const auto& [source, compressed] :
       std::vector<std::pair<std::string, bool>>{{dir / "a.tar", false},
                                                 {"pipe:cat " + dir / "a.tar", false},
                                                 {dir / "a.tar.gz", true},
                                                 {"pipe:cat " + dir / "a.tar.xz", true}}) {
    expect_stream_of(source, compressed, bytes);
  }
  // A command that exits non-zero: at its end, or before the bytes asked for.
  const std::string failing = "pipe:head -c 3000 " + dir / "a.tar" + "; exit 3";
  EXPECT_EQ(error_text([&] { ShardStream(failing, false).finish(); }),
            "shard " + failing + ": the command exited with status 3 after 3000 bytes");
  EXPECT_EQ(error_text([&] {
              ShardStream s(failing, false);
              s.skip(2000);
              std::string b(2000, '\0');
              s.read(b.data(), b.size());
            }),
            "shard " + failing +
                ": the command's output ends at byte 3000, before byte 4000 (the command exited with "
                "status 3)");
  EXPECT_EQ(error_text([&] { ShardStream(dir / "a.tar", false).skip(100001); }),
            "shard " + dir / "a.tar" + ": the shard ends at byte 100000, before byte 100001");
  // A compressed shard cut short.
  ASSERT_EQ(run_command("head -c 2000 " + dir / "a.tar.gz" + " > " + dir / "cut.tar.gz").exit_code, 0);
  const std::string cut = error_text([&] { ShardStream(dir / "cut.tar.gz", true).skip(50000); });
  EXPECT_EQ(cut.rfind("shard " + dir / "cut.tar.gz" + ": ", 0), 0u) << cut;
  // A compressed command's output that does not decompress names how the command ended, and leaves no command or
  // pipe behind; trailing bytes past a compressed stream are read so that the command ends.
  const auto open_fds = [] { return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}); };
  const auto fds = open_fds();
  EXPECT_EQ(error_text([] { ShardStream("pipe:exit 5", true); }).rfind("shard pipe:exit 5: cannot decompress: ", 0),
            0u);
  EXPECT_NE(error_text([] { ShardStream("pipe:exit 5", true); }).find(" (the command exited with status 5)"),
            std::string::npos);
  int status = 0;
  EXPECT_LE(::waitpid(-1, &status, WNOHANG), 0) << "a command left unreaped";
  EXPECT_EQ(open_fds(), fds);
  const std::string trailing = "pipe:cat " + dir / "a.tar.gz" + "; head -c 300000 /dev/zero";
  {
    ShardStream s(trailing, true);
    EXPECT_EQ(s.rest(1 << 20), bytes);
  }
  // Compression only through libraries: a stream that starts as lrzip's does never runs an lrzip program.
  ASSERT_EQ(run_command("mkdir -p " + dir / "bin" + " && printf '#!/bin/sh\ntouch " + dir / "ran" + "\ncat\n' > " +
                        dir / "bin/lrzip" + " && chmod +x " + dir / "bin/lrzip")
                .exit_code,
            0);
  write_file(dir / "l.tar.lrz", std::string("LRZI\0\x06", 6) + std::string(200, 'x'));
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (dir / "bin" + ":" + path).c_str(), 1);
  try {
    ShardStream(dir / "l.tar.lrz", true).finish();
  } catch (const std::exception&) {
  }
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "ran"));
  // A command that would write forever is stopped when its stream is dropped.
  const auto start = std::chrono::steady_clock::now();
  {
    ShardStream s("pipe:yes", false);
    s.skip(100000);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  // An index command tried again, then its failure named.
  EXPECT_EQ(read_command("pipe:cat " + dir / "a.tar", ShardFetch{0, 0.01, 0.01}), bytes);
  EXPECT_EQ(error_text([&] {
              read_command("pipe:exit 4", ShardFetch{2, 0.01, 0.01});
            }),
            "shard pipe:exit 4: the command exited with status 4 after 0 bytes (after 2 retries, data.shard_retries)");
}

TEST(ShardStream, AnHttpShardIsItsBodyDecompressedAndAnErrorAnswerNamesTheShard) {
  if (!built_with_libcurl()) GTEST_SKIP() << "built without libcurl";
  if (!have_nginx()) GTEST_SKIP() << "nginx absent";
  TempDir dir;
  std::mt19937 gen(4);
  std::string bytes(400000, '\0');
  for (char& c : bytes) c = static_cast<char>(gen() % 5);
  write_file(dir / "www/a.tar", bytes);
  ASSERT_EQ(run_command("gzip -k " + dir / "www/a.tar" + " && xz -k " + dir / "www/a.tar").exit_code, 0);
  NginxServer nginx(dir / "www");
  for (const auto& [name, compressed] :
       std::vector<std::pair<std::string, bool>>{{"a.tar", false}, {"a.tar.gz", true}, {"a.tar.xz", true}})
    expect_stream_of(nginx.url() + name, compressed, bytes);
  EXPECT_EQ(nginx.count("/a.tar.gz", 200), 1) << nginx.requests();
  const std::string missing = nginx.url() + "none.tar.gz";
  EXPECT_EQ(error_text([&] { ShardStream(missing, true); }), "shard " + missing + ": HTTP 404 Not Found");
  // A stream dropped before its end stops its transfer; the shard is read whole again by the next.
  { ShardStream(nginx.url() + "a.tar.gz", true).skip(100); }
  ShardStream again(nginx.url() + "a.tar.gz", true);
  EXPECT_EQ(again.rest(1 << 20), bytes);
}

}  // namespace
}  // namespace ddp::test
