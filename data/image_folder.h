// Image folders in ImageNet's layout (ROOT/CLASS/.../IMAGE): torchvision's ImageFolder listing, and its samples
// decoded and transformed one at a time when a batch is assembled.
#pragma once

#include "data/dataset.h"

#include <string>
#include <vector>

namespace ddp {

// What torchvision.datasets.ImageFolder(root) finds: the class folders sorted, each one's files (any depth, links
// followed) in sorted order of folder then name, kept when the name ends in one of its extensions (any case).
struct ImageFolderListing {
  std::vector<std::string> classes;  // index = class_to_idx's value
  std::vector<std::string> paths;
  std::vector<int64_t> targets;
};

// torchvision's IMG_EXTENSIONS.
const std::vector<std::string>& image_extensions();

// Throws ConfigError naming the folder when it holds no class folder, or a class folder holds no image.
ImageFolderListing list_image_folder(const std::string& root);

// The class folders alone (find_classes); throws ConfigError as above.
std::vector<std::string> find_image_classes(const std::string& root);

}  // namespace ddp
