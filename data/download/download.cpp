// MNIST download: torchvision's mirrors and MD5s, per-file mirror fallback, verified atomic writes, one clear error.
#include "data/download/download.h"

#include "config/config.h"

#include "data/download/http_fetch.h"
#include "data/download/md5.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ddp {
namespace {

namespace fs = std::filesystem;

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Makes a completed rename durable: fsync of the folder that holds the new name.
std::string sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_text("opening " + dir + " to sync it failed");
  std::string why = ::fsync(fd) == 0 ? "" : errno_text("fsync of " + dir + " failed");
  ::close(fd);
  return why;
}

// Fetches url into a temporary file beside final_path, verifies its MD5, then renames it into place.
// Returns "" on success or why this URL gave no usable copy; never leaves the temporary file behind.
std::string fetch_verified(const std::string& url, const std::string& dir, const std::string& final_path,
                           const std::string& expected_md5) {
  std::string temp = final_path + ".download-XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return errno_text("creating a temporary file in " + dir + " failed");
  ::fchmod(fd, 0644);
  Md5 md5;
  std::string why = http_fetch(url, fd, md5);
  if (why.empty() && ::fsync(fd) != 0) why = errno_text("fsync of " + temp + " failed");
  if (::close(fd) != 0 && why.empty()) why = errno_text("closing " + temp + " failed");
  if (why.empty()) {
    std::string got = md5.hex_digest();
    if (got != expected_md5) why = "MD5 mismatch: got " + got + ", expected " + expected_md5;
  }
  if (why.empty() && ::rename(temp.c_str(), final_path.c_str()) != 0)
    why = errno_text("renaming " + temp + " to " + final_path + " failed");
  if (!why.empty()) {
    ::unlink(temp.c_str());
    return why;
  }
  return sync_dir(dir);
}

std::string with_trailing_slash(const std::string& prefix) {
  return !prefix.empty() && prefix.back() == '/' ? prefix : prefix + "/";
}

}  // namespace

const std::vector<ExpectedFile>& torchvision_mnist_files() {
  static const std::vector<ExpectedFile> files = {
      {"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
      {"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"},
      {"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"},
      {"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"},
  };
  return files;
}

const std::vector<std::string>& torchvision_mnist_mirrors() {
  static const std::vector<std::string> mirrors = {"https://ossci-datasets.s3.amazonaws.com/mnist/",
                                                   "http://yann.lecun.com/exdb/mnist/"};
  return mirrors;
}

void download_mnist(const std::string& dir, const std::vector<std::string>& mirrors, const DownloadNote& note) {
  download_files(dir, mirrors.empty() ? torchvision_mnist_mirrors() : mirrors, torchvision_mnist_files(), note);
}

void download_files(const std::string& dir, const std::vector<std::string>& mirrors,
                    const std::vector<ExpectedFile>& files, const DownloadNote& note) {
  std::string guidance = "; put the files (MD5s as torchvision lists them) in data.dir (" + dir +
                         ") by hand, or set data.mirrors to a reachable copy";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw std::runtime_error("data.download: cannot create data.dir (" + dir +
                             "): " + (ec ? ec.message() : std::string("not a directory")));
  std::vector<std::string> failures;
  for (const ExpectedFile& file : files) {
    std::string final_path = dir + "/" + file.name;
    std::string unpacked = final_path.substr(0, final_path.size() - (fs::path(file.name).extension() == ".gz" ? 3 : 0));
    std::string replacing;
    if (fs::exists(final_path)) {
      std::string got = md5_file_hex(final_path);
      if (got == file.md5) continue;
      replacing = final_path + " has MD5 " + got + ", expected " + file.md5;
      note("data.download: " + replacing + "; fetching a verified copy to replace it");
    } else if (unpacked != final_path && fs::exists(unpacked)) {
      continue;  // already unpacked by the user: nothing to verify against (the MD5s are of the .gz)
    }
    std::vector<std::string> attempts;
    bool fetched = false;
    for (const std::string& mirror : mirrors) {
      std::string url = with_trailing_slash(mirror) + file.name;
      note("data.download: fetching " + url);
      std::string why = fetch_verified(url, dir, final_path, file.md5);
      if (why.empty()) {
        fetched = true;
        note("data.download: saved " + final_path + " (MD5 " + file.md5 + " verified)");
        break;
      }
      note("data.download: " + url + " failed: " + why);
      attempts.push_back(url + " (" + why + ")");
    }
    if (fetched) continue;
    if (mirrors.empty()) attempts.push_back("no mirrors configured");
    failures.push_back(file.name + " from " + join(attempts, ", ") +
                       (replacing.empty() ? "" : " [kept the existing file: " + replacing + "]"));
  }
  if (!failures.empty())
    throw std::runtime_error("data.download: could not get " + join(failures, "; and ") + guidance);
}

}  // namespace ddp
