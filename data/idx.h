// IDX (MNIST-format) file reader: raw or gzip, validated, into a uint8 tensor.
#pragma once

#include <torch/types.h>

#include <string>

namespace ddp {

// Reads an unsigned-byte IDX file (magic 0x0000080N, N = number of dims) into a uint8 tensor of those dims.
// Errors (missing file, bad magic, truncation, trailing bytes) throw std::runtime_error naming the file.
torch::Tensor read_idx(const std::string& path);

// Writes a uint8 tensor as an IDX file (gzip when the path ends in .gz). Used by tests and the synthetic set.
void write_idx(const std::string& path, const torch::Tensor& data);

}  // namespace ddp
