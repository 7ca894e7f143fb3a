// Reader for files written by torch.save / torch::pickle_save (zip format) into an IValue.
#pragma once

#include <ATen/core/ivalue.h>

#include <stdexcept>
#include <vector>

namespace ddp {

// The bytes are not a torch.save file this reader understands; the message says why (no file name).
struct TorchSaveFormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses the bytes of a torch.save file (zip format, pickle protocol 2-5) with a strict reader of exactly the
// objects a state dict holds: dicts, collections.OrderedDict (its _metadata attribute is dropped), lists, tuples,
// str/int/float/bool/None, tensors of every plain dtype (views, offsets and strides kept, storages shared) and
// nn.Parameter. Dicts come back as GenericDict. Anything else (pickled modules, quantized or sparse tensors, the
// legacy non-zip format, TorchScript archives) throws TorchSaveFormatError naming what was found.
c10::IValue read_torch_save(const std::vector<char>& bytes);

}  // namespace ddp
