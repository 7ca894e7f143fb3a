// Reader for torch.save files: LibTorch's unpickler (plain dicts of tensors and values).
#include "checkpoint/pickle_reader.h"

#include <torch/serialize.h>

namespace ddp {

c10::IValue read_torch_save(const std::vector<char>& bytes) { return torch::pickle_load(bytes); }

}  // namespace ddp
