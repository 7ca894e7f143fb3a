// sorted_subfolders: one level of a folder, links followed, errors read as "no entries".
#include "base/folders.h"

#include <algorithm>
#include <filesystem>

namespace ddp {

std::vector<std::string> sorted_subfolders(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ddp
