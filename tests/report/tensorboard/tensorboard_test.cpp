// TensorBoard writer: CRC32C and an independent event-file reader.
//
// CRC32C vectors and TensorFlow-written CRCs, and an independent protobuf reader (tests/python/tfevents_reader.py)
// proven on a TF2 file, then on our files, and failing on a flipped byte.
#include "report/tensorboard/tensorboard.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>
#include <sstream>

namespace ddp::test {
namespace {

// An event file TensorFlow 2's tf.summary.scalar wrote (tests/fixtures/tensorboard/README.md).
std::string tf2_fixture() { return source_dir() + "/tests/fixtures/tensorboard/tf2-scalars.tfevents"; }

struct Scalar {
  std::string tag;
  int64_t step = 0;
  double value = 0, wall_time = 0;
};

struct ReaderResult {
  int exit_code = -1;
  std::string output;
  std::vector<std::string> file_versions;
  std::vector<double> file_version_times;
  std::vector<Scalar> scalars;
  size_t first_scalar_line = 0, first_file_version_line = 0;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> parts;
  std::stringstream ss(line);
  std::string part;
  while (std::getline(ss, part, '\t')) parts.push_back(part);
  return parts;
}

ReaderResult read_events(const std::string& path, bool canonical = false) {
  ReaderResult r;
  auto cmd = run_command(python() + " " + source_dir() + "/tests/python/tfevents_reader.py " +
                         (canonical ? "--canonical " : "") + shell_quote(path));
  r.exit_code = cmd.exit_code;
  r.output = cmd.output;
  std::stringstream ss(cmd.output);
  std::string line;
  for (size_t n = 1; std::getline(ss, line); ++n) {
    auto f = split_tabs(line);
    if (f.size() == 3 && f[0] == "file_version") {
      if (r.file_versions.empty()) r.first_file_version_line = n;
      r.file_version_times.push_back(std::strtod(f[1].c_str(), nullptr));
      r.file_versions.push_back(f[2]);
    } else if (f.size() == 5 && f[0] == "scalar") {
      if (r.scalars.empty()) r.first_scalar_line = n;
      r.scalars.push_back({f[1], std::strtoll(f[2].c_str(), nullptr, 10), std::strtod(f[3].c_str(), nullptr),
                           std::strtod(f[4].c_str(), nullptr)});
    }
  }
  return r;
}

// Reason to skip when the reader's tools are missing, else "".
std::string reader_unavailable() {
  if (!python_has_modules("tensorboard.compat.proto.event_pb2"))
    return python() + " does not have tensorboard (scripts/setup installs it into the venv)";
  return "";
}

#define SKIP_WITHOUT_READER()               \
  do {                                      \
    std::string why = reader_unavailable(); \
    if (!why.empty()) GTEST_SKIP() << why;  \
  } while (0)

uint32_t load_le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
uint64_t load_le64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;  // also tells -0.0 from 0.0
}

TEST(TensorBoardCrc32c, KnownVectors) {
  // The check value of CRC-32C and the iSCSI test vectors of RFC 3720 appendix B.4.
  EXPECT_EQ(crc32c(std::string("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string()), 0u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) up[i] = static_cast<char>(i), down[i] = static_cast<char>(31 - i);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

TEST(TensorBoardCrc32c, MatchesEveryCrcInTensorFlowWrittenFile) {
  ASSERT_TRUE(std::filesystem::exists(tf2_fixture())) << tf2_fixture();
  std::string blob = read_file(tf2_fixture());
  size_t pos = 0, records = 0;
  while (pos < blob.size()) {
    ASSERT_LE(pos + 12, blob.size());
    uint64_t length = load_le64(blob, pos);
    EXPECT_EQ(masked_crc32c(blob.data() + pos, 8), load_le32(blob, pos + 8)) << "record " << records;
    ASSERT_LE(pos + 12 + length + 4, blob.size());
    std::string data = blob.substr(pos + 12, length);
    EXPECT_EQ(masked_crc32c(data.data(), data.size()), load_le32(blob, pos + 12 + length)) << "record " << records;
    EXPECT_EQ(tfrecord_frame(data), blob.substr(pos, 12 + length + 4)) << "record " << records;
    pos += 12 + length + 4;
    ++records;
  }
  EXPECT_EQ(records, 101u);  // file_version + 100 scalars
}

TEST(TensorBoardReader, RecoversTf2TensorScalarsFromTensorFlowFile) {
  SKIP_WITHOUT_READER();
  ASSERT_TRUE(std::filesystem::exists(tf2_fixture())) << tf2_fixture();
  auto r = read_events(tf2_fixture());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.file_versions, std::vector<std::string>{"brain.Event:2"}) << r.output;
  ASSERT_EQ(r.scalars.size(), 100u) << r.output;
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(r.scalars[i].tag, "my_metric");
    EXPECT_EQ(r.scalars[i].step, i);
    EXPECT_EQ(r.scalars[i].value, 0.5 * static_cast<double>(i)) << "step " << i;
  }
  // TensorFlow's own bytes are protobuf's serialization, so --canonical is a fair check of ours.
  EXPECT_EQ(read_events(tf2_fixture(), true).exit_code, 0);
}

TEST(TensorBoardWriter, ReaderRecoversWrittenScalarsAtFloat32Precision) {
  SKIP_WITHOUT_READER();
  TempDir dir;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Scalar> written = {
      {"train/loss", 0, 2.302585092994046, 1700000000.25},
      {"train/accuracy", 0, 0.0, 1700000000.5},
      {"lr", 1, 0.1, 1700000001.125},
      {"amp/loss_scale", 2, 65536.0, 1700000002.0},
      {"perf/samples_per_s", 3, 123456789.0, 1700000003.000001},
      {"eval/loss", 4, -2.25, 1700000004.5},
      {"eval/accuracy", 5, -0.0, 1700000005.0},
      {"tiny", 6, 1e-30, 1700000006.0},
      {"denormal", 7, 1e-42, 1700000007.0},
      {"large", 8, 3.0e38, 1700000008.0},
      {"beyond_float", 9, 1e39, 1700000009.0},
      {"just_above_max", 9, 3.4028235e38, 1700000009.5},
      {"pos_inf", 10, inf, 1700000010.0},
      {"neg_inf", 11, -inf, 1700000011.0},
      {"nan", 12, std::nan(""), 1700000012.0},
      {"big_step", int64_t(1) << 40, 1.0, 1700000013.0},
      {"negative_step", -3, 1.0, 1700000014.0},
  };
  std::string path;
  {
    TensorBoardWriter writer(dir / "tensorboard");
    path = writer.path();
    for (const auto& s : written) writer.add_scalar(s.tag, s.value, s.step, s.wall_time);
  }
  auto r = read_events(path, true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.file_versions, std::vector<std::string>{"brain.Event:2"});
  EXPECT_LT(r.first_file_version_line, r.first_scalar_line);  // the file_version event comes first
  ASSERT_EQ(r.scalars.size(), written.size()) << r.output;
  for (size_t i = 0; i < written.size(); ++i) {
    const auto& w = written[i];
    const auto& got = r.scalars[i];
    EXPECT_EQ(got.tag, w.tag);
    EXPECT_EQ(got.step, w.step) << w.tag;
    EXPECT_EQ(got.wall_time, w.wall_time) << w.tag;
    // Expected float32: IEEE round-to-nearest of the double (what the x86 conversion instruction does).
    volatile double v = w.value;
    float expected = static_cast<float>(v);
    EXPECT_TRUE(same_float(static_cast<float>(got.value), expected)) << w.tag << ": " << got.value;
    if (!std::isnan(got.value)) {
      EXPECT_EQ(got.value, static_cast<double>(static_cast<float>(got.value))) << w.tag << " not a float32";
    }
  }
}

TEST(TensorBoardWriter, DefaultWallTimeIsNowAndEachAddIsFlushed) {
  SKIP_WITHOUT_READER();
  TempDir dir;
  TensorBoardWriter writer(dir.path());
  double before = wall_time_now();
  writer.add_scalar("train/loss", 1.5, 0);
  writer.add_scalar("train/loss", 1.25, 10);
  double after = wall_time_now();
  auto r = read_events(writer.path());  // the writer is still open: everything must already be on disk
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.scalars.size(), 2u) << r.output;
  EXPECT_EQ(r.scalars[1].step, 10);
  EXPECT_EQ(r.scalars[1].value, 1.25);
  for (const auto& s : r.scalars) {
    EXPECT_GE(s.wall_time, before);
    EXPECT_LE(s.wall_time, after);
  }
  ASSERT_EQ(r.file_version_times.size(), 1u);
  EXPECT_LE(r.file_version_times[0], before);
  EXPECT_GT(r.file_version_times[0], before - 60);
}

TEST(TensorBoardWriter, FileNamedLikeSummaryWriterInCreatedDirectory) {
  TempDir dir;
  std::string log_dir = dir / "out/tensorboard";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  double before = wall_time_now();
  TensorBoardWriter a(log_dir), b(log_dir);
  EXPECT_TRUE(std::filesystem::is_regular_file(a.path()));
  EXPECT_NE(a.path(), b.path());  // two writers in the same second do not clobber each other
  std::filesystem::path p(a.path());
  EXPECT_EQ(p.parent_path(), std::filesystem::path(log_dir));
  std::smatch m;
  std::string name = p.filename().string();
  std::regex pattern(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+))");
  ASSERT_TRUE(std::regex_match(name, m, pattern)) << name;
  EXPECT_NEAR(std::stod(m[1]), before, 2.0);
  EXPECT_EQ(m[2].str(), host);
  EXPECT_EQ(std::stol(m[3]), static_cast<long>(getpid()));
}

// Every event of FILE as "event KIND STEP DETAIL" lines (tfevents_reader.py --events --canonical).
CommandResult event_kinds(const std::string& path) {
  return run_command(python() + " " + source_dir() + "/tests/python/tfevents_reader.py --events --canonical " +
                     shell_quote(path));
}

TEST(TensorBoardWriter, PurgeFromWritesWhatSummaryWriterWritesWithPurgeStep) {
  SKIP_WITHOUT_READER();
  if (!python_has_modules("torch.utils.tensorboard"))
    GTEST_SKIP() << python() << " does not have torch.utils.tensorboard";
  TempDir dir;
  const CommandResult torch_run = run_command(python() + " " + source_dir() + "/tests/python/tb_purge_reference.py " +
                                              shell_quote(dir / "torch") + " 7 2>/dev/null");
  ASSERT_EQ(torch_run.exit_code, 0) << torch_run.output;
  const std::string torch_file = torch_run.output.substr(0, torch_run.output.find('\n'));
  std::string ours_file;
  {
    TensorBoardWriter writer(dir / "ours");
    writer.purge_from(7);
    writer.add_scalar("x", 1.0, 7);
    ours_file = writer.path();
  }
  const CommandResult theirs = event_kinds(torch_file), ours = event_kinds(ours_file);
  ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  EXPECT_NE(theirs.output.find("event\tsession_log\t7\tSTART\n"), std::string::npos) << theirs.output;
  EXPECT_EQ(ours.output, theirs.output);  // the same events, in the same order, at the same steps
}

TEST(TensorBoardWriter, FlippedByteOrTruncationMakesReaderFail) {
  SKIP_WITHOUT_READER();
  TempDir dir;
  std::string path;
  {
    TensorBoardWriter writer(dir.path());
    path = writer.path();
    for (int step = 0; step < 3; ++step) writer.add_scalar("train/loss", 1.0 / (step + 1), step);
  }
  ASSERT_EQ(read_events(path).exit_code, 0);
  std::string good = read_file(path);
  // Second record (the first scalar): its length, length CRC, payload and payload CRC.
  size_t rec = 12 + load_le64(good, 0) + 4;
  size_t len = load_le64(good, rec);
  struct Case {
    size_t at;
    std::string expect;
  };
  std::vector<Case> cases = {{rec + 0, "length CRC mismatch"},
                             {rec + 9, "length CRC mismatch"},
                             {rec + 12 + len / 2, "data CRC mismatch"},
                             {rec + 12 + len + 2, "data CRC mismatch"}};
  for (const auto& c : cases) {
    std::string bad = good;
    bad[c.at] = static_cast<char>(bad[c.at] ^ 0x01);
    std::string bad_path = dir / "flipped";
    write_file(bad_path, bad);
    auto r = read_events(bad_path);
    EXPECT_EQ(r.exit_code, 1) << "byte " << c.at << ": " << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << "byte " << c.at << ": " << r.output;
  }
  write_file(dir / "truncated", good.substr(0, good.size() - 1));
  auto r = read_events(dir / "truncated");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp::test
