// Image folders of mixed files for the data.decode tests: JPEGs nvJPEG decodes and files it leaves to the CPU.
#pragma once

#include "config/config.h"

#include <string>
#include <vector>

namespace ddp::test {

// ROOT/{train,val}/{a,b}/ with, in each class folder, JPEGs of the kinds nvJPEG decodes (baseline 4:2:0 and 4:4:4,
// progressive, grayscale) and files it does not (a PNG, a CMYK and an arithmetic-coded JPEG), 8 per split. Every
// image is at most 30 pixels high: crops of it at data.image_size = 16 are decoded at full size on the CPU too (no
// DCT scaling), as evaluation's at resize_size 18. `copies` > 1 repeats each file under another name.
void write_mixed_image_folder(const std::string& root, int copies = 1);

// Whether nvJPEG decodes the file at `path` of such a folder (its name says its kind).
bool decoded_on_device(const std::string& path);

// The config of a job on such a folder: image_folder, image_size 16, ResNet-18, plus `keys`.
Config mixed_image_folder_config(const std::string& root, const std::vector<std::string>& keys = {});

}  // namespace ddp::test
