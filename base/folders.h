// sorted_subfolders: the folders inside a folder, as Python's sorted(e.name for e in os.scandir(d) if e.is_dir()).
#pragma once

#include <string>
#include <vector>

namespace ddp {

// Names of the entries of `dir` that are folders (links to folders included), in byte order; empty when `dir` cannot
// be read.
std::vector<std::string> sorted_subfolders(const std::string& dir);

}  // namespace ddp
