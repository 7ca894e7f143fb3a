// MNIST download: fetch missing IDX files from mirrors, verify torchvision's MD5s, write atomically.
#pragma once

#include <string>
#include <vector>

namespace ddp {

// Ensures dir holds the four MNIST .gz files; fetches the missing ones. Empty mirrors = torchvision's list.
void download_mnist(const std::string& dir, const std::vector<std::string>& mirrors);

}  // namespace ddp
