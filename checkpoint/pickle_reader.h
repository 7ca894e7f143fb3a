// Reader for files written by torch.save / torch::pickle_save (zip format) into an IValue.
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

namespace ddp {

// Parses the bytes of a torch.save file. Dicts come back as GenericDict, including the
// collections.OrderedDict that torch.save(model.state_dict()) writes.
c10::IValue read_torch_save(const std::vector<char>& bytes);

}  // namespace ddp
