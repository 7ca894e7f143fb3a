// MNIST download: fetch missing IDX files from mirrors, verify torchvision's MD5s, write atomically.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ddp {

// Where the download's progress lines go (the trainer's rank-0 console).
using DownloadNote = std::function<void(const std::string&)>;

// One file to fetch: its name on the mirrors (and in the target folder) and its expected MD5 (hex).
struct ExpectedFile {
  std::string name;
  std::string md5;
};

// torchvision.datasets.MNIST.resources and .mirrors (torchvision 0.14).
const std::vector<ExpectedFile>& torchvision_mnist_files();
const std::vector<std::string>& torchvision_mnist_mirrors();

// Ensures dir holds the four MNIST .gz files; fetches the missing ones. Empty mirrors = torchvision's list.
void download_mnist(const std::string& dir, const std::vector<std::string>& mirrors, const DownloadNote& note);

// For each file: kept when dir/NAME has the expected MD5 or its unpacked form (NAME without .gz) exists;
// otherwise fetched from MIRROR + NAME, mirrors in order, until one copy has the expected MD5. A copy is
// written to a temporary name in dir, fsynced, then renamed over dir/NAME (a file with a wrong MD5 is
// replaced only by a verified copy, with a note). Each fetch, save and failed attempt is a `note` line. Every file
// is tried; then one single-line
// std::runtime_error names each file that could not be had, every URL tried and why it failed, and dir.
void download_files(const std::string& dir, const std::vector<std::string>& mirrors,
                    const std::vector<ExpectedFile>& files, const DownloadNote& note);

}  // namespace ddp
