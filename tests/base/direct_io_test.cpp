// DirectWriter and read_file_chunks: every byte written and read back whatever the pieces' sizes, past the page
// cache on a local disk's filesystem (none of a file's pages but the last partial one resident after its write or
// a read that bypasses the cache), and through the cache elsewhere (tmpfs); written inline or behind (the bytes
// staged on one thread, written on another), and by write_file_atomic from a producer at idle priority.
#include "base/atomic_file.h"
#include "base/direct_io.h"
#include "tests/support/test_support.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ddp::test {
namespace {

// How many of the file's pages are in the page cache (mincore of a mapping, which faults nothing in).
size_t direct_io_resident_pages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open");
  const size_t size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
  if (size == 0) {
    ::close(fd);
    return 0;
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw std::runtime_error(path + ": cannot map");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((size + page - 1) / page);
  const int rc = ::mincore(map, size, in_core.data());
  ::munmap(map, size);
  if (rc != 0) throw std::runtime_error(path + ": mincore failed");
  size_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident;
}

// Writes `bytes` to `path` through a DirectWriter in pieces of `piece` bytes (`behind`: from a thread of their own,
// the writes made on this one); whether it went past the page cache.
bool direct_io_write(const std::string& path, const std::vector<char>& bytes, size_t piece, bool behind) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot create");
  DirectWriter writer(fd);
  const bool direct = writer.direct();
  const auto produce = [&] {
    for (size_t at = 0; at < bytes.size(); at += piece)
      writer.write(bytes.data() + at, std::min(piece, bytes.size() - at));
    writer.finish();
  };
  if (behind) {
    writer.write_behind();
    std::thread producer(produce);
    writer.write_staged();
    producer.join();
  } else {
    produce();
  }
  EXPECT_EQ(writer.error(), 0) << path;
  EXPECT_EQ(::fsync(fd), 0);
  ::close(fd);
  return direct;
}

std::vector<char> direct_io_read(const std::string& path, PageCache cache = PageCache::Bypass) {
  std::vector<char> out;
  read_file_chunks(path, cache, [&](const char* data, size_t n) { out.insert(out.end(), data, data + n); });
  return out;
}

// Sizes around the page and the 4 MiB staging buffer, in pieces smaller and larger than either.
void direct_io_round_trips(const std::string& dir, bool local_disk) {
  std::mt19937 gen(7);
  const size_t mib = size_t{1} << 20;
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, 4 * mib, 4 * mib + 123, 9 * mib + 7}) {
    std::vector<char> bytes(size);
    for (char& b : bytes) b = static_cast<char>(gen());
    for (size_t piece : {size_t{1000003}, 16 * mib}) {
      const bool behind = piece < mib;
      const std::string path = dir + "/file-" + std::to_string(size) + "-" + std::to_string(piece);
      const bool direct = direct_io_write(path, bytes, piece, behind);
      EXPECT_EQ(direct, local_disk) << path;
      EXPECT_EQ(direct_io_read(path), bytes) << path;
      if (!local_disk) continue;
      // Only the page the last partial one was written into may be cached; the read leaves the cache as it was,
      // and one through the cache fills it (at least half of it here: the kernel may take pages back under memory
      // pressure between the read and the count, which a bypassing read, leaving one page at most, never reaches).
      EXPECT_LE(direct_io_resident_pages(path), size % 4096 == 0 ? 0u : 1u) << path;
      EXPECT_EQ(direct_io_read(path, PageCache::Use), bytes) << path;
      EXPECT_GE(direct_io_resident_pages(path), ((size + 4095) / 4096 + 1) / 2) << path;
    }
  }
}

TEST(DirectIo, AFileOnALocalDiskIsWrittenAndReadWholePastThePageCache) {
  TempDir dir;
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  const auto type = static_cast<unsigned long>(fs.f_type);
  if (type != EXT4_SUPER_MAGIC && type != XFS_SUPER_MAGIC && type != BTRFS_SUPER_MAGIC && type != F2FS_SUPER_MAGIC)
    GTEST_SKIP() << dir.path() << " is not on ext4, XFS, btrfs or F2FS";
  const int fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(direct_io_suits(fd));
  ::close(fd);
  direct_io_round_trips(dir.path(), true);
}

TEST(DirectIo, AFileOnTmpfsIsWrittenAndReadWholeThroughThePageCache) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  char tmpl[] = "/dev/shm/ddptest-direct-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  direct_io_round_trips(dir, false);
  std::filesystem::remove_all(dir);
}

// write_file_atomic with the bytes produced at idle priority: `produce` runs on a thread of its own (SCHED_IDLE,
// named ddp-serialise) while this one makes the writes; the file holds every byte, in order, through more staging
// buffers than may wait at once. A producer that throws leaves neither the file nor its temporary behind, and its
// exception is the caller's.
TEST(DirectIo, BytesProducedAtIdlePriorityAreWrittenInOrderAndAFailedProducerLeavesNoFile) {
  TempDir dir;
  std::vector<char> bytes(9 * DirectWriter::kBehindBuffers * (size_t{1} << 20) + 5);
  std::mt19937 gen(3);
  for (char& b : bytes) b = static_cast<char>(gen());
  int policy = -1;
  char name[16] = "";
  const auto caller = std::this_thread::get_id();
  std::thread::id producer;
  write_file_atomic(
      dir / "made.bin",
      [&](const ByteSink& sink) {
        policy = sched_getscheduler(0);
        pthread_getname_np(pthread_self(), name, sizeof name);
        producer = std::this_thread::get_id();
        for (size_t at = 0; at < bytes.size(); at += 777777)
          sink(bytes.data() + at, std::min<size_t>(777777, bytes.size() - at));
      },
      Producer::IdleThread);
  EXPECT_EQ(policy, SCHED_IDLE);
  EXPECT_EQ(std::string(name), "ddp-serialise");
  EXPECT_NE(producer, caller);
  EXPECT_EQ(direct_io_read(dir / "made.bin", PageCache::Use), bytes);

  try {
    write_file_atomic(
        dir / "failed.bin",
        [&](const ByteSink& sink) {
          sink(bytes.data(), bytes.size() / 2);
          throw std::runtime_error("the producer failed");
        },
        Producer::IdleThread);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "the producer failed");
  }
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"made.bin"});
}

TEST(DirectIo, AMissingFileIsAnErrorNamingIt) {
  TempDir dir;
  try {
    direct_io_read(dir / "absent.pt");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(dir / "absent.pt" + ": cannot open: No such file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ddp::test
