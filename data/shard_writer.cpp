// ShardWriter: libarchive's tar writer (POSIX pax, ustar headers where they suffice), and make_shards.
#include "data/shard_writer.h"

#include "base/atomic_file.h"
#include "data/dataset.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/shard_index.h"
#include "data/tar_shard.h"

#include <archive.h>
#include <archive_entry.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace ddp {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBlock = 512;

std::string shard_number(size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06zu", n);
  return buf;
}

// An RGB image, uint8 [3, H, W], as a PNG (libpng, default compression).
std::string encode_png(const torch::Tensor& chw) {
  const torch::Tensor hwc = chw.permute({1, 2, 0}).contiguous();
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(hwc.size(1));
  image.height = static_cast<png_uint_32>(hwc.size(0));
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, hwc.data_ptr<uint8_t>(), 0, nullptr))
    throw std::runtime_error(std::string("PNG encoding failed: ") + image.message);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, hwc.data_ptr<uint8_t>(), 0, nullptr))
    throw std::runtime_error(std::string("PNG encoding failed: ") + image.message);
  out.resize(size);
  return out;
}

// The image member's extension of an image folder's file: jpg, jpeg or png (lowercased); throws naming it otherwise.
std::string image_member(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".jpg" || ext == ".jpeg" || ext == ".png") return ext.substr(1);
  throw std::runtime_error(path +
                           ": shards hold JPEG and PNG images (.jpg, .jpeg, .png), the images ddptrain reads "
                           "from them");
}

// A key's last part without dots (webdataset splits a member's name at the first dot of its last part).
std::string undotted(std::string s) {
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

}  // namespace

ShardWriter::ShardWriter(std::string prefix, int64_t max_bytes) : prefix_(std::move(prefix)), max_bytes_(max_bytes) {}

ShardWriter::~ShardWriter() {
  if (!archive_) return;
  archive_write_free(archive_);
  std::error_code ec;
  fs::remove(temporary_, ec);
}

void ShardWriter::open_next() {
  current_ = prefix_ + "-" + shard_number(shards_.size()) + ".tar";
  temporary_ = current_ + ".tmp-" + std::to_string(::getpid());
  archive_ = archive_write_new();
  if (!archive_) throw std::runtime_error(current_ + ": libarchive could not start a writer");
  if (archive_write_set_format_pax_restricted(archive_) != ARCHIVE_OK ||
      archive_write_open_filename(archive_, temporary_.c_str()) != ARCHIVE_OK)
    throw std::runtime_error(current_ + ": " + archive_why(archive_, "libarchive failed"));
  bytes_ = 0;
}

void ShardWriter::close_current() {
  const int closed = archive_write_close(archive_);
  const std::string why = closed == ARCHIVE_OK ? "" : archive_why(archive_, "libarchive failed");
  archive_write_free(archive_);
  archive_ = nullptr;
  if (!why.empty()) throw std::runtime_error(current_ + ": " + why);
  fs::rename(temporary_, current_);
  write_file_index(current_);
  shards_.push_back(current_);
}

void ShardWriter::write(const std::string& key, const std::vector<std::pair<std::string, std::string>>& members) {
  if (!archive_) open_next();
  for (const auto& [ext, bytes] : members) {
    struct archive_entry* entry = archive_entry_new();
    const std::string name = key + "." + ext;
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, 0444);
    archive_entry_set_size(entry, static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_mtime(entry, 0, 0);
    archive_entry_set_uname(entry, "bigdata");
    archive_entry_set_gname(entry, "bigdata");
    const bool ok = archive_write_header(archive_, entry) == ARCHIVE_OK &&
                    archive_write_data(archive_, bytes.data(), bytes.size()) == static_cast<la_ssize_t>(bytes.size());
    archive_entry_free(entry);
    if (!ok)
      throw std::runtime_error(current_ + ": member " + name + ": " + archive_why(archive_, "libarchive failed"));
    bytes_ += kBlock + (static_cast<int64_t>(bytes.size()) + kBlock - 1) / kBlock * kBlock;
  }
  if (bytes_ >= max_bytes_) close_current();
}

std::vector<std::string> ShardWriter::finish() {
  if (archive_) close_current();
  return shards_;
}

void make_shards(const Config& cfg, const std::string& out_dir, int64_t shard_bytes,
                 const std::function<void(const std::string&)>& say) {
  const DataConfig& data = cfg.data;
  const std::string kind = data.dataset.name;
  if (kind != "image_folder" && kind != "cifar10")
    throw ConfigError("--make-shards packs data.dataset = \"image_folder\" or \"cifar10\", not \"" + kind + "\"");
  fs::create_directories(out_dir);
  std::optional<Dataset> cifar;
  if (kind == "cifar10") cifar = load_cifar10(data);
  if (!cifar) {  // the class names, in label order, for data.class_names
    const std::vector<std::string> classes = find_image_classes(data.dir + "/train");
    std::string text;
    for (const std::string& name : classes) text += name + "\n";
    write_file_atomic(out_dir + "/classes.txt", std::vector<char>(text.begin(), text.end()));
    say("classes: " + std::to_string(classes.size()) + " names in " + out_dir + "/classes.txt: data.class_names = \"" +
        out_dir + "/classes.txt\", model.num_classes = " + std::to_string(classes.size()));
  }
  for (const char* split : {"train", "val"}) {
    ShardWriter writer(out_dir + "/" + split, shard_bytes);
    int64_t samples = 0;
    if (cifar) {
      const Split& s = std::string(split) == "train" ? cifar->train : cifar->test;
      char key[32];
      for (int64_t i = 0; i < s.size(); ++i, ++samples) {
        const int64_t label = s.labels[i].item<int64_t>();
        std::snprintf(key, sizeof key, "%lld/%08lld", static_cast<long long>(label), static_cast<long long>(i));
        writer.write(key, {{"png", encode_png(s.images[i])}, {"cls", std::to_string(label)}});
      }
    } else {
      const ImageFolderListing listing = list_image_folder(data.dir + "/" + split);
      char index[32];
      for (size_t i = 0; i < listing.paths.size(); ++i, ++samples) {
        const std::string& path = listing.paths[i];
        const int64_t label = listing.targets[i];
        std::snprintf(index, sizeof index, "%08zu", i);
        const std::string key =
            listing.classes[static_cast<size_t>(label)] + "/" + index + "_" + undotted(fs::path(path).stem().string());
        const std::vector<uint8_t> image = read_file_bytes(path);
        writer.write(key,
                     {{image_member(path), std::string(image.begin(), image.end())}, {"cls", std::to_string(label)}});
      }
    }
    const std::vector<std::string> shards = writer.finish();
    const std::string last = shard_number(shards.empty() ? 0 : shards.size() - 1);
    say(std::string(split) + ": " + std::to_string(samples) + " samples in " + std::to_string(shards.size()) +
        " shard(s): data." + (std::string(split) == "train" ? "train" : "val") + "_shards = \"" + out_dir + "/" +
        split + "-{000000.." + last + "}.tar\"");
  }
}

}  // namespace ddp
