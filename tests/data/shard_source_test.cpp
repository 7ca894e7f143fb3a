// Tests: a shard's bytes over HTTP are the file's bytes, asked for with one Range request each on a kept-alive
// connection (nginx); server errors are one line naming the shard and the bytes, retried only when transient
// (data.shard_retries), whether the server answers 5xx, cuts the transfer, ignores Range or has changed the file; a
// whole body streamed is the file's bytes, its failure said, and a transfer nobody reads any more stops.
#include "data/shard_source.h"
#include "data/storage_error.h"
#include "tests/support/local_server.h"
#include "tests/support/nginx_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>

namespace ddp::test {
namespace {

// `n` seeded random bytes.
std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(gen() & 0xff);
  return bytes;
}

// Fast retries: the waits are not what these tests check.
ShardFetch quick(int64_t retries) { return ShardFetch{retries, 0.01, 0.05}; }

// The StorageError read_shard_bytes throws, or "" when it reads; `other` set when it threw anything else.
std::string storage_error(const std::string& shard, int64_t offset, int64_t length, int64_t shard_bytes,
                          const ShardFetch& fetch, std::string* other = nullptr) {
  try {
    read_shard_bytes(shard, offset, length, shard_bytes, fetch);
  } catch (const StorageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    if (other) *other = e.what();
    return "";
  }
  return "";
}

TEST(ShardSource, PiecesOfARangeAreItsBytesInOrderFromDiskAndOverHttpInOneRequest) {
  TempDir dir;
  const std::string bytes = random_bytes(400000, 9);
  write_file(dir / "www/s/a.tar", bytes);
  // More pieces than one preadv takes (IOV_MAX, 1024 on Linux), of sizes 1 to 300 bytes.
  std::mt19937 gen(3);
  std::vector<int64_t> sizes;
  int64_t total = 0;
  while (total < 300000) total += sizes.emplace_back(1 + static_cast<int64_t>(gen() % 300));
  ASSERT_GT(sizes.size(), 1024u);
  for (const size_t at : {size_t{0}, size_t{500}, sizes.size()}) sizes.insert(sizes.begin() + at, 0);  // empty ones
  const int64_t offset = 777;
  const auto check = [&](const std::vector<std::string>& pieces, const std::string& where) {
    ASSERT_EQ(pieces.size(), sizes.size()) << where;
    int64_t at = offset;
    for (size_t k = 0; k < sizes.size(); at += sizes[k++])
      ASSERT_EQ(pieces[k], bytes.substr(static_cast<size_t>(at), static_cast<size_t>(sizes[k]))) << where << k;
  };
  check(read_shard_pieces(dir / "www/s/a.tar", offset, sizes, 400000, quick(0)), "disk, piece ");
  EXPECT_EQ(read_shard_pieces(dir / "www/s/a.tar", offset, {0, 0}, 400000, quick(0)),
            (std::vector<std::string>{"", ""}));
  // A piece past the file's end: the error read_shard_bytes gives for the whole range.
  std::vector<int64_t> beyond = {1000, 2000};
  EXPECT_EQ(error_of([&] { read_shard_pieces(dir / "www/s/a.tar", 398000, beyond, 400000, quick(0)); }),
            "shard " + (dir / "www/s/a.tar") + ": cannot read bytes 398000-401000 (the file ends there)");
  if (!built_with_libcurl() || !have_nginx()) GTEST_SKIP() << "built without libcurl or nginx absent";
  NginxServer nginx(dir / "www");
  check(read_shard_pieces(nginx.url() + "s/a.tar", offset, sizes, 400000, quick(0)), "HTTP, piece ");
  EXPECT_EQ(nginx.count("/s/a.tar", 206), 1) << nginx.requests();
}

TEST(ShardSource, ARangeOverHttpIsTheFilesBytesOneRequestEachOnOneConnection) {
  if (!built_with_libcurl()) GTEST_SKIP() << "built without libcurl";
  if (!have_nginx()) GTEST_SKIP() << "nginx absent";
  TempDir dir;
  const std::string bytes = random_bytes(300000, 5);
  write_file(dir / "www/s/a.tar", bytes);
  NginxServer nginx(dir / "www");
  const std::string url = nginx.url() + "s/a.tar";
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 1}, {0, 512}, {1000, 70000}, {299999, 1}, {5, 299995}};
  for (const auto& [offset, length] : ranges) {
    EXPECT_EQ(read_shard_bytes(url, offset, length, 300000, quick(0)), bytes.substr(offset, length));
    EXPECT_EQ(read_shard_bytes(dir / "www/s/a.tar", offset, length, 300000, quick(0)), bytes.substr(offset, length));
  }
  EXPECT_EQ(nginx.count("/s/a.tar", 206), static_cast<int>(ranges.size())) << nginx.requests();
  EXPECT_NE(nginx.requests().find("bytes=1000-70999"), std::string::npos) << nginx.requests();
  // One connection carried every request (the handle of this thread keeps it).
  std::istringstream lines(nginx.requests());
  std::set<std::string> connections;
  for (std::string method, uri, status, sent, connection, range; lines >> method >> uri >> status >> sent >> connection;
       std::getline(lines, range))
    connections.insert(connection);
  EXPECT_EQ(connections.size(), 1u) << nginx.requests();
  // A local shard shorter than its index says is std::runtime_error, as before.
  std::string other;
  EXPECT_EQ(storage_error(dir / "www/s/a.tar", 299999, 2, 300000, quick(0), &other), "");
  EXPECT_NE(other.find("cannot read bytes 299999-300001 (the file ends there)"), std::string::npos) << other;
}

TEST(ShardSource, ServerErrorsNameTheShardAndTheBytesAndOnlyTransientOnesAreRetried) {
  if (!built_with_libcurl()) GTEST_SKIP() << "built without libcurl";
  if (!have_nginx()) GTEST_SKIP() << "nginx absent";
  TempDir dir;
  write_file(dir / "www/s/a.tar", random_bytes(4096, 6));
  NginxServer nginx(dir / "www", "location = /s/busy.tar { return 503; }\n    location = /s/bad.tar { return 500; }");
  const std::string base = nginx.url() + "s/";
  EXPECT_EQ(storage_error(base + "bad.tar", 0, 100, -1, quick(2)),
            "shard " + base +
                "bad.tar: bytes 0-100: HTTP 500 Internal Server Error (after 2 retries, "
                "data.shard_retries)");
  EXPECT_EQ(nginx.count("/s/bad.tar", 500), 3) << nginx.requests();
  EXPECT_EQ(storage_error(base + "busy.tar", 512, 10, -1, quick(1)),
            "shard " + base +
                "busy.tar: bytes 512-522: HTTP 503 Service Temporarily Unavailable (after 1 retry, "
                "data.shard_retries)");
  EXPECT_EQ(nginx.count("/s/busy.tar", 503), 2) << nginx.requests();
  // Not found is not retried.
  EXPECT_EQ(storage_error(base + "missing.tar", 0, 100, -1, quick(3)),
            "shard " + base + "missing.tar: bytes 0-100: HTTP 404 Not Found");
  EXPECT_EQ(nginx.count("/s/missing.tar", 404), 1) << nginx.requests();
  // A shard of another size than its index was made for (rewritten since) is not read.
  const std::string stale = storage_error(base + "a.tar", 0, 100, 4000, quick(3));
  EXPECT_EQ(stale, "shard " + base +
                       "a.tar: bytes 0-100: the shard is 4096 bytes, its index was made for 4000 (index "
                       "it again with ddptrain --index-shards)");
  EXPECT_EQ(nginx.count("/s/a.tar", 206), 1) << nginx.requests();
  // No server: retried, then the connection's failure.
  const int closed = free_port();
  const std::string refused =
      storage_error("http://127.0.0.1:" + std::to_string(closed) + "/s/a.tar", 0, 1, -1, quick(1));
  EXPECT_NE(refused.find("Couldn't connect to server (after 1 retry, data.shard_retries)"), std::string::npos)
      << refused;
  // The whole of a file beside a shard (its index), or the same errors.
  EXPECT_EQ(read_url(base + "a.tar", quick(0)).size(), 4096u);
  try {
    read_url(base + "a.tar.ddpidx", quick(2));
    ADD_FAILURE() << "no error for a missing index";
  } catch (const StorageError& e) {
    EXPECT_EQ(std::string(e.what()), base + "a.tar.ddpidx: HTTP 404 Not Found");
  }
}

// The faulty server of tests/python/faulty_range_server.py in MODE, serving `root`.
LocalServer faulty_server(const std::string& root, const std::string& mode) {
  return LocalServer({python(), "-u", source_dir() + "/tests/python/faulty_range_server.py", root, "{port}", mode},
                     root + "." + mode.substr(0, mode.find(':')) + ".log", "faulty_range_server.py");
}

TEST(ShardSource, RetriesOutlastABusyServerAndACutOrUnrangedAnswerIsNotTakenForTheBytes) {
  if (!built_with_libcurl()) GTEST_SKIP() << "built without libcurl";
  TempDir dir;
  const std::string bytes = random_bytes(200000, 7);
  write_file(dir / "www/a.tar", bytes);
  {  // 2 answers of 503, then the bytes: 2 retries suffice, 1 does not.
    LocalServer busy = faulty_server(dir / "www", "fail-first:2");
    EXPECT_EQ(read_shard_bytes(busy.url() + "a.tar", 100, 50000, 200000, quick(2)), bytes.substr(100, 50000));
    EXPECT_EQ(count_of(busy.log(), "GET /a.tar 503"), 2u) << busy.log();
    EXPECT_EQ(count_of(busy.log(), "GET /a.tar 206"), 1u) << busy.log();
  }
  {
    LocalServer busy = faulty_server(dir / "www", "fail-first:2");
    const std::string why = storage_error(busy.url() + "a.tar", 100, 50000, 200000, quick(1));
    EXPECT_NE(why.find("bytes 100-50100: HTTP 503"), std::string::npos) << why;
    EXPECT_NE(why.find("(after 1 retry, data.shard_retries)"), std::string::npos) << why;
  }
  {  // Every answer cut after 1000 bytes: retried, then libcurl's words for the cut transfer.
    LocalServer cut = faulty_server(dir / "www", "cut-after:1000");
    const std::string why = storage_error(cut.url() + "a.tar", 0, 100000, 200000, quick(2));
    EXPECT_NE(why.find("shard " + cut.url() + "a.tar: bytes 0-100000: "), std::string::npos) << why;
    EXPECT_NE(why.find("(after 2 retries, data.shard_retries)"), std::string::npos) << why;
    EXPECT_EQ(count_of(cut.log(), "GET /a.tar 206"), 3u) << cut.log();
  }
  {  // The whole file for a Range request: stopped at the bytes asked for, not retried.
    LocalServer whole = faulty_server(dir / "www", "ignore-range");
    const std::string why = storage_error(whole.url() + "a.tar", 0, 1000, 200000, quick(3));
    EXPECT_NE(why.find("bytes 0-1000: the server sent more than the bytes asked for: it does not honour Range"),
              std::string::npos)
        << why;
    EXPECT_EQ(count_of(whole.log(), "GET /a.tar 200"), 1u) << whole.log();
  }
}

// All of a UrlBody's socket until its end.
std::string body_bytes(UrlBody& body) {
  std::string out;
  char chunk[4096];
  for (ssize_t got; (got = ::read(body.fd(), chunk, sizeof chunk)) != 0;) {
    if (got < 0) {
      ADD_FAILURE() << "read: " << std::strerror(errno);
      break;
    }
    out.append(chunk, static_cast<size_t>(got));
  }
  return out;
}

TEST(ShardSource, AWholeBodyStreamedIsTheFilesBytesAndHowItsTransferEndedIsSaid) {
  if (!built_with_libcurl()) GTEST_SKIP() << "built without libcurl";
  if (!have_nginx()) GTEST_SKIP() << "nginx absent";
  TempDir dir;
  const std::string bytes = random_bytes(3 << 20, 9);  // more than the socket pair holds: the reader paces it
  write_file(dir / "www/s/a.tar.gz", bytes);
  NginxServer nginx(dir / "www",
                    "location = /s/bad.tar.gz { return 500; }\n"
                    "location = /s/slow.tar.gz { alias " +
                        dir / "www/s/a.tar.gz" + "; limit_rate 64k; }");
  {
    UrlBody body(nginx.url() + "s/a.tar.gz");
    EXPECT_EQ(body.failure(), "");
    EXPECT_EQ(body_bytes(body), bytes);
    EXPECT_EQ(body.ended(), "");
  }
  EXPECT_EQ(nginx.count("/s/a.tar.gz", 200), 1) << nginx.requests();
  // An error answer is known when the body starts, its page never passed on.
  for (const auto& [name, why] :
       {std::pair{"missing.tar.gz", "HTTP 404 Not Found"}, std::pair{"bad.tar.gz", "HTTP 500 Internal Server Error"}}) {
    UrlBody body(nginx.url() + "s/" + name);
    EXPECT_EQ(body.failure(), why);
    EXPECT_EQ(body_bytes(body), "");
    EXPECT_EQ(body.ended(), why);
  }
  {  // Cut after 1000 bytes: the reader gets them, then the end, then libcurl's words for the cut.
    LocalServer cut = faulty_server(dir / "www", "cut-after:1000");
    UrlBody body(cut.url() + "s/a.tar.gz");
    EXPECT_EQ(body_bytes(body), bytes.substr(0, 1000));
    const std::string why = body.ended();
    EXPECT_NE(why.find("transfer closed with " + std::to_string(bytes.size() - 1000) + " bytes remaining"),
              std::string::npos)
        << why;
  }
  {  // A body read no further (64 KiB/s: about a minute to send it all) is stopped when it is dropped.
    const auto start = std::chrono::steady_clock::now();
    {
      UrlBody body(nginx.url() + "s/slow.tar.gz");
      char some[1000];
      EXPECT_GT(::read(body.fd(), some, sizeof some), 0);
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  }
  // A refused connection.
  UrlBody refused("http://127.0.0.1:9/none.tar.gz");
  EXPECT_NE(refused.failure().find("127.0.0.1"), std::string::npos) << refused.failure();
}

}  // namespace
}  // namespace ddp::test
