// Tests for data.download against a loopback http.server: verified atomic fetches, MD5 errors, mirror fallback, no
// refetch.
#include "data/download/download.h"
#include "tests/data/download/local_http_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp {
namespace {

namespace fs = std::filesystem;
using namespace ddp::test;

const std::string kTrainImages = "train-images-idx3-ubyte.gz";

// One line of Python's stdout per line, or a failed test.
std::vector<std::string> python_lines(const std::string& code, const std::vector<std::string>& args = {}) {
  std::string cmd = shell_quote(python()) + " -c " + shell_quote(code);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  CommandResult r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> lines;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string hashlib_md5(const std::string& path) {
  auto lines =
      python_lines("import hashlib,sys; print(hashlib.md5(open(sys.argv[1],'rb').read()).hexdigest())", {path});
  return lines.empty() ? "" : lines[0];
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "missing \"" << (part) << "\" in: " << (text)

// The download's note lines (the trainer passes its rank-0 console), collected.
struct NoteLog {
  std::string text;
  DownloadNote sink() {
    return [this](const std::string& line) { text += line + "\n"; };
  }
};

// Four small MNIST-format .gz files in dir, with their hashlib MD5s.
std::vector<ExpectedFile> tiny_files(const std::string& dir) {
  write_tiny_mnist(dir, 20, 10, 3);
  std::vector<ExpectedFile> files;
  for (const ExpectedFile& f : torchvision_mnist_files()) files.push_back({f.name, hashlib_md5(dir + "/" + f.name)});
  return files;
}

TEST(DownloadTable, MatchesTorchvision) {
  auto lines = python_lines(
      "from torchvision.datasets import MNIST\n"
      "for m in MNIST.mirrors: print('mirror', m)\n"
      "for name, md5 in MNIST.resources: print('file', name, md5)\n");
  std::vector<std::string> ours;
  for (const auto& m : torchvision_mnist_mirrors()) ours.push_back("mirror " + m);
  for (const auto& f : torchvision_mnist_files()) ours.push_back("file " + f.name + " " + f.md5);
  EXPECT_EQ(ours, lines);
}

// (1) The real files of tests/fixtures/mnist download, verify (MD5s from hashlib) and land; the absent train images are named.
TEST(DownloadFiles, FixtureFilesLandAndMissingTrainImagesIsExplained) {
  std::vector<ExpectedFile> files;
  for (const ExpectedFile& f : torchvision_mnist_files()) {
    std::string fixture = mnist_fixture_dir() + "/" + f.name;
    files.push_back({f.name, fs::exists(fixture) ? hashlib_md5(fixture) : f.md5});
    if (f.name != kTrainImages) {
      ASSERT_TRUE(fs::exists(fixture)) << fixture;
    }
  }
  TempDir served, target;
  for (const ExpectedFile& f : files)
    if (f.name != kTrainImages) fs::copy_file(mnist_fixture_dir() + "/" + f.name, served / f.name);
  LocalHttpServer server(served.path());
  std::string data_dir = target / "nested/mnist";

  std::string msg = error_of([&] { download_files(data_dir, {server.url()}, files, NoteLog().sink()); });
  EXPECT_CONTAINS(msg, kTrainImages);
  EXPECT_CONTAINS(msg, server.url() + kTrainImages + " (HTTP 404");
  EXPECT_CONTAINS(msg, "data.dir (" + data_dir + ")");
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const ExpectedFile& f : files) {
    if (f.name == kTrainImages) continue;
    EXPECT_EQ(msg.find(f.name), std::string::npos) << f.name << " was fetched fine: " << msg;
    EXPECT_EQ(read_file(data_dir + "/" + f.name), read_file(served / f.name)) << f.name;
    EXPECT_EQ(server.gets_of(f.name), 1) << server.log();
  }
  // Only the three final names: no temporary files, nothing under the missing file's name.
  EXPECT_EQ(names_in(data_dir), (std::set<std::string>{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                                                       "train-labels-idx1-ubyte.gz"}));
}

// download_mnist itself checks torchvision's MD5s: each fixture file lands exactly when hashlib says it matches.
TEST(DownloadMnist, AcceptsFixtureFilesOnlyWhenTheirMd5IsTorchvisions) {
  TempDir served, target;
  std::vector<ExpectedFile> present;
  for (const ExpectedFile& f : torchvision_mnist_files())
    if (fs::exists(mnist_fixture_dir() + "/" + f.name)) {
      fs::copy_file(mnist_fixture_dir() + "/" + f.name, served / f.name);
      present.push_back({f.name, hashlib_md5(served / f.name)});
    }
  ASSERT_FALSE(present.empty()) << "no MNIST files in " << mnist_fixture_dir();
  auto oracle = python_lines("from torchvision.datasets import MNIST\nfor n, m in MNIST.resources: print(n, m)\n");
  LocalHttpServer server(served.path());

  std::string msg = error_of([&] { download_mnist(target.path(), {server.url()}, NoteLog().sink()); });
  for (const ExpectedFile& f : present) {
    std::string torchvision_md5;
    for (const auto& line : oracle)
      if (line.rfind(f.name + " ", 0) == 0) torchvision_md5 = line.substr(f.name.size() + 1);
    ASSERT_FALSE(torchvision_md5.empty()) << f.name;
    SCOPED_TRACE(f.name + " hashlib " + f.md5 + " torchvision " + torchvision_md5);
    if (f.md5 == torchvision_md5) {
      EXPECT_EQ(read_file(target / f.name), read_file(served / f.name));
    } else {
      EXPECT_CONTAINS(msg, f.name + " from " + server.url() + f.name + " (MD5 mismatch: got " + f.md5 + ", expected " +
                               torchvision_md5 + ")");
      EXPECT_FALSE(fs::exists(target / f.name));
    }
  }
  EXPECT_CONTAINS(msg, kTrainImages);
}

// (2) Corrupted bytes on the mirror: MD5 error with both hashes, nothing left in data.dir.
TEST(DownloadFiles, CorruptedCopyIsRejectedAndLeavesNothing) {
  TempDir served, target;
  std::vector<ExpectedFile> files = tiny_files(served.path());
  const ExpectedFile& labels = files[3];
  std::string bytes = read_file(served / labels.name);
  bytes[bytes.size() / 2] ^= 0x5a;
  write_file(served / labels.name, bytes);
  std::string corrupted_md5 = hashlib_md5(served / labels.name);
  ASSERT_NE(corrupted_md5, labels.md5);
  LocalHttpServer server(served.path());

  std::string msg = error_of([&] { download_files(target.path(), {server.url()}, {labels}, NoteLog().sink()); });
  EXPECT_CONTAINS(msg, labels.name);
  EXPECT_CONTAINS(msg, "MD5 mismatch: got " + corrupted_md5 + ", expected " + labels.md5);
  EXPECT_CONTAINS(msg, "data.dir (" + target.path() + ")");
  EXPECT_EQ(server.gets_of(labels.name), 1);
  EXPECT_TRUE(names_in(target.path()).empty());
}

// (3) A refused connection and an unsupported scheme fall through to the working mirror.
TEST(DownloadFiles, FallsThroughFailingMirrorsToAWorkingOne) {
  TempDir served, target;
  std::vector<ExpectedFile> files = tiny_files(served.path());
  LocalHttpServer server(served.path());
  std::string refused = "http://127.0.0.1:" + std::to_string(free_port()) + "/";
  std::string unsupported = "ftp://127.0.0.1:" + std::to_string(server.port()) + "/";
  std::string good_without_slash = server.url().substr(0, server.url().size() - 1);

  NoteLog notes;
  download_files(target.path(), {refused, unsupported, good_without_slash}, files, notes.sink());
  const std::string& log = notes.text;
  for (const ExpectedFile& f : files) {
    EXPECT_EQ(read_file(target / f.name), read_file(served / f.name)) << f.name;
    EXPECT_EQ(server.gets_of(f.name), 1) << f.name;
    EXPECT_CONTAINS(log, refused + f.name + " failed: ");
    EXPECT_CONTAINS(log, unsupported + f.name + " failed: ");
  }
  EXPECT_CONTAINS(log, "Couldn't connect");
  EXPECT_CONTAINS(log, "\"ftp\" not supported");
  EXPECT_EQ(names_in(target.path()).size(), files.size());
}

// (4) Valid files are not fetched again (request log, mtimes); unpacked files count as present; a file with a
// wrong MD5 is replaced by a verified copy, or kept (and reported) when no mirror has one.
TEST(DownloadFiles, KeepsValidFilesAndReplacesOnlyWrongOnes) {
  TempDir served, target;
  std::vector<ExpectedFile> files = tiny_files(served.path());
  LocalHttpServer server(served.path());
  download_files(target.path(), {server.url()}, files, NoteLog().sink());
  std::vector<fs::file_time_type> mtimes;
  for (const ExpectedFile& f : files) mtimes.push_back(fs::last_write_time(target / f.name));

  download_files(target.path(), {server.url()}, files, NoteLog().sink());
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(server.gets_of(files[i].name), 1) << files[i].name;
    EXPECT_EQ(fs::last_write_time(target / files[i].name), mtimes[i]) << files[i].name;
  }

  fs::rename(target / files[0].name, target / "train-images-idx3-ubyte");  // the user unpacked it
  write_file(target / files[1].name, "not the labels");
  std::string wrong_md5 = hashlib_md5(target / files[1].name);
  NoteLog notes;
  download_files(target.path(), {server.url()}, files, notes.sink());
  const std::string& log = notes.text;
  EXPECT_EQ(server.gets_of(files[0].name), 1);
  EXPECT_FALSE(fs::exists(target / files[0].name));
  EXPECT_EQ(server.gets_of(files[1].name), 2);
  EXPECT_EQ(read_file(target / files[1].name), read_file(served / files[1].name));
  EXPECT_CONTAINS(log, files[1].name + " has MD5 " + wrong_md5 + ", expected " + files[1].md5);
  EXPECT_CONTAINS(log, "replace");

  write_file(target / files[2].name, "user bytes");
  std::string msg =
      error_of([&] { download_files(target.path(), {server.url() + "absent/"}, files, NoteLog().sink()); });
  EXPECT_EQ(read_file(target / files[2].name), "user bytes");
  EXPECT_CONTAINS(msg, files[2].name + " from " + server.url() + "absent/" + files[2].name + " (HTTP 404");
  EXPECT_CONTAINS(msg, "kept the existing file");
}

// (5) Through the binary: the missing train images end the run with exit code 1 and one `error:` line.
TEST(DownloadBinary, MissingTrainImagesIsOneErrorLine) {
  TempDir served, work;
  for (const ExpectedFile& f : torchvision_mnist_files())
    if (fs::exists(mnist_fixture_dir() + "/" + f.name))
      fs::copy_file(mnist_fixture_dir() + "/" + f.name, served / f.name);
  LocalHttpServer server(served.path());
  std::string data_dir = work / "mnist";
  CommandResult r = run_command(shell_quote(ddptrain_path()) + " " + shell_quote(source_dir() + "/configs/mnist.toml") +
                                " --data.download=true " + shell_quote("--data.mirrors=[\"" + server.url() + "\"]") +
                                " " + shell_quote("--data.dir=" + data_dir) + " " +
                                shell_quote("--job.out_dir=" + work / "out") + " --metrics.progress=plain");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::vector<std::string> error_lines;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);)
    if (line.find("error:") != std::string::npos) error_lines.push_back(line);
  ASSERT_EQ(error_lines.size(), 1u) << r.output;
  EXPECT_EQ(error_lines[0].rfind("error: data.download: could not get ", 0), 0u) << error_lines[0];
  EXPECT_CONTAINS(error_lines[0], server.url() + kTrainImages + " (HTTP 404");
  EXPECT_CONTAINS(error_lines[0], "data.dir (" + data_dir + ")");
  EXPECT_FALSE(fs::exists(data_dir + "/" + kTrainImages));
  // The download's notes are rank 0's console lines.
  EXPECT_CONTAINS(r.output, "data.download: fetching " + server.url() + kTrainImages);
}

}  // namespace
}  // namespace ddp
