// torchvision.datasets.ImageFolder's listing (torchvision/datasets/folder.py: find_classes, make_dataset), and the
// image_folder dataset: train/ and val/ splits whose samples are decoded and transformed as batches are assembled;
// its row.
#include "data/image_folder.h"
#include "data/dataset_kind.h"

#include "base/folders.h"
#include "config/config.h"
#include "data/encoded_images.h"
#include "data/image_decode.h"

#include <algorithm>
#include <filesystem>
#include <set>

namespace ddp {
namespace {

namespace fs = std::filesystem;

bool has_image_extension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const std::string& ext : image_extensions())
    if (lower.size() >= ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) return true;
  return false;
}

// os.walk(top, followlinks=True): every folder under top with the names of its non-folder entries. A folder reached
// twice through links is walked once (os.walk would loop for ever); unreadable folders are passed over, as os.walk's
// default onerror does.
void walk_folder(const fs::path& dir, std::vector<std::pair<std::string, std::vector<std::string>>>& out,
                 std::set<fs::path>& seen) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec || !seen.insert(canonical).second) return;
  std::vector<std::string> files;
  std::vector<fs::path> subfolders;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec))
      subfolders.push_back(it->path());
    else
      files.push_back(it->path().filename().string());
  }
  out.emplace_back(dir.string(), std::move(files));
  for (const fs::path& sub : subfolders) walk_folder(sub, out, seen);
}

std::string extension_list() {
  std::string text;
  for (const std::string& ext : image_extensions()) text += (text.empty() ? "" : ", ") + ext;
  return text;
}

}  // namespace

const std::vector<std::string>& image_extensions() {
  static const std::vector<std::string> extensions = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                      ".pgm", ".tif",  ".tiff", ".webp"};
  return extensions;
}

std::vector<std::string> find_image_classes(const std::string& root) {
  std::vector<std::string> classes = sorted_subfolders(root);
  if (classes.empty())
    throw ConfigError(root +
                      ": no class folder found (an image folder holds one folder of images per class; data.dir "
                      "holds train/ and val/ in that layout)");
  return classes;
}

ImageFolderListing list_image_folder(const std::string& root) {
  ImageFolderListing listing;
  listing.classes = find_image_classes(root);
  std::vector<std::string> empty;
  for (size_t c = 0; c < listing.classes.size(); ++c) {
    std::vector<std::pair<std::string, std::vector<std::string>>> folders;
    std::set<fs::path> seen;
    walk_folder(fs::path(root) / listing.classes[c], folders, seen);
    std::sort(folders.begin(), folders.end());  // sorted(os.walk(...)): by folder path
    const size_t before = listing.paths.size();
    for (auto& [folder, files] : folders) {
      std::sort(files.begin(), files.end());
      for (const std::string& f : files) {
        std::string path = (fs::path(folder) / f).string();
        if (!has_image_extension(path)) continue;
        listing.paths.push_back(std::move(path));
        listing.targets.push_back(static_cast<int64_t>(c));
      }
    }
    if (listing.paths.size() == before) empty.push_back((fs::path(root) / listing.classes[c]).string());
  }
  if (!empty.empty()) {
    std::string names;
    for (const std::string& e : empty) names += (names.empty() ? "" : ", ") + e;
    throw ConfigError("no image in class folder" + std::string(empty.size() > 1 ? "s " : " ") + names +
                      " (image files end in " + extension_list() + ", any case)");
  }
  return listing;
}

namespace {

// One split's files, read and transformed per sample.
class ImageFolderSamples : public EncodedImages {
 public:
  ImageFolderSamples(const std::string& root, std::vector<std::string> paths, const DataConfig& data, bool augment)
      : EncodedImages(root, static_cast<int64_t>(paths.size()), data, augment), paths_(std::move(paths)) {}

 private:
  Encoded fetch(int64_t index) const override {
    const std::string& path = paths_[static_cast<size_t>(index)];
    return {path, read_file_bytes(path)};
  }

  std::vector<std::string> paths_;
};

Split image_folder_split(const std::string& root, const DataConfig& data, bool augment,
                         std::vector<std::string>* classes) {
  ImageFolderListing listing = list_image_folder(root);
  if (classes->empty()) {
    *classes = listing.classes;
  } else if (listing.classes != *classes) {
    throw ConfigError(root + ": its class folders differ from the training split's (" +
                      std::to_string(listing.classes.size()) + " against " + std::to_string(classes->size()) +
                      "); train/ and val/ need the same classes");
  }
  Split split;
  split.labels = torch::tensor(listing.targets, torch::kInt64);
  auto source = std::make_shared<ImageFolderSamples>(root, std::move(listing.paths), data, augment);
  split.transforms = source->describe();
  split.source = std::move(source);
  return split;
}

}  // namespace

Dataset load_image_folder(const DataConfig& data) {
  Dataset ds;
  ds.name = "image_folder";
  ds.train = image_folder_split(data.dir + "/train", data, data.augment == Augment::Standard, &ds.classes);
  ds.test = image_folder_split(data.dir + "/val", data, /*augment=*/false, &ds.classes);
  ds.channels = 3;
  ds.image_size = data.augment == Augment::Standard ? data.train_crop_size : data.val_crop_size;
  ds.num_classes = static_cast<int64_t>(ds.classes.size());
  return ds;
}

// ImageNet's layout and ImageNet's Normalize values (torchvision's reference training scripts); the crop the model sees
// is data.image_size (224 by default, torchvision's RandomResizedCrop(224)), the classes train/'s folders.
const DatasetKind& image_folder_dataset() {
  static const DatasetKind kind{
      {"image_folder",
       "a folder of JPEG/PNG images per class (ImageNet's layout)",
       "data/imagenet",
       {0.485, 0.456, 0.406},
       {0.229, 0.224, 0.225},
       /*channels=*/3,
       /*image_size=*/224,
       /*any_image_size=*/true,
       /*num_classes=*/0,
       /*download=*/false,
       /*class_folders=*/true,
       /*image_files=*/true},
      [](const DataConfig& data, const ModelConfig&, int64_t, const DownloadNote&) { return load_image_folder(data); }};
  return kind;
}

}  // namespace ddp
