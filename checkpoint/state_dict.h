// Model state dicts: PyTorch-ordered name -> tensor lists, saved/loaded in torch.save's format.
#pragma once

#include "base/atomic_file.h"

#include <ATen/core/Dict.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Parameters and buffers in nn.Module.state_dict() order (each module's own params, then buffers, then children).
NamedTensors module_state(const torch::nn::Module& module);
// The same as a checkpoint entry: a dict name -> a copy in host memory (host_copy).
c10::impl::GenericDict module_state_entry(const torch::nn::Module& module);

// Writes a dict of name -> tensor that Python's torch.load(path) reads as it is (weights_only=True): torch.save's
// zip format with an untagged pickle (write_torch_save). Atomic: written to PATH.tmp-PID, fsynced, renamed.
void save_state_dict(const std::string& path, const NamedTensors& state);
// The same file added to `files`, replaced when they are committed.
void save_state_dict(AtomicFileSet& files, const std::string& path, const NamedTensors& state);
// Reads a dict of name -> tensor saved by torch.save (plain dict or OrderedDict) or by save_state_dict.
NamedTensors load_state_dict_file(const std::string& path);
// The value torch.save wrote to `path`; unreadable files throw naming the file.
c10::IValue read_torch_save_file(const std::string& path);
// Whether `value` is a dict of str -> tensor (an empty dict is one).
bool is_tensor_dict(const c10::IValue& value);
// `value` as name -> tensor pairs; anything else throws naming `path` and what was found instead.
NamedTensors tensor_dict(const c10::IValue& value, const std::string& path);
// Copies `state` into the module's parameters and buffers; mismatches throw listing missing, unexpected
// and mis-shaped keys, with `origin` (the file) in the message.
void apply_state(torch::nn::Module& module, const NamedTensors& state, const std::string& origin);

// torch.save's zip archive of `value` (dicts, lists, strings, numbers, tensors), its pickle untagged so that
// torch.load with weights_only=True accepts it; torch::pickle_save's archive is the same but for the type tags.
// `expect`, when given, is told before the first byte about how many bytes will come (never fewer than will).
void write_torch_save(const ByteSink& sink, const c10::IValue& value,
                      const std::function<void(size_t)>& expect = nullptr);
std::vector<char> torch_save_bytes(const c10::IValue& value);

}  // namespace ddp
