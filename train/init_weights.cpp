// model.init_from loading: unwraps checkpoint dicts, strips DDP's `module.` prefix, suggests the fix on a mismatch.
#include "train/init_weights.h"

#include "checkpoint/safetensors.h"
#include "checkpoint/state_dict.h"
#include "models/classifier.h"
#include "models/model_kind.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

namespace ddp {
namespace {

struct InitLayout {
  NamedTensors state;
  std::string note;  // how the file's layout was read ("" for a plain state dict)
};

bool non_empty_tensor_dict(const c10::IValue& v) { return is_tensor_dict(v) && v.toGenericDict().size() > 0; }

// The state dict in `value`: itself, or the tensor dict under "model" / "state_dict"; nested elsewhere throws.
InitLayout unwrap_init_state(const c10::IValue& value, const std::string& path) {
  if (is_tensor_dict(value)) return {tensor_dict(value, path), ""};
  if (value.isGenericDict()) {
    const auto dict = value.toGenericDict();
    for (const std::string key : {"model", "state_dict"}) {
      auto it = dict.find(c10::IValue(key));
      if (it != dict.end() && non_empty_tensor_dict(it->value()))
        return {tensor_dict(it->value(), path), "checkpoint dict, weights under \"" + key + "\""};
    }
    for (const auto& item : dict)
      if (item.key().isString() && non_empty_tensor_dict(item.value())) {
        const std::string key = item.key().toStringRef();
        throw std::runtime_error(
            path + ": the weights are nested under \"" + key +
            "\" (model.init_from looks under \"model\" or \"state_dict\"): save that entry alone, " +
            "torch.save(checkpoint[\"" + key + "\"], \"" + path + "\")");
      }
  }
  return {tensor_dict(value, path), ""};  // throws, saying what the file holds instead
}

bool every_key_starts_with(const NamedTensors& state, const std::string& prefix) {
  return std::all_of(state.begin(), state.end(), [&](const auto& e) { return e.first.rfind(prefix, 0) == 0; });
}

std::set<std::string> key_set(const NamedTensors& state) {
  std::set<std::string> out;
  for (const auto& [name, _] : state) out.insert(name);
  return out;
}

// The longest prefix ending in '.' that every key carries ("" when none).
std::string common_dotted_prefix(const NamedTensors& state) {
  if (state.empty()) return "";
  std::string prefix = state.front().first;
  for (const auto& [name, _] : state) {
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix.resize(n);
  }
  const size_t dot = prefix.rfind('.');
  return dot == std::string::npos ? "" : prefix.substr(0, dot + 1);
}

// The fix for a prefix every file key carries and the model's keys lack (the longest whose removal leaves some
// of the model's keys); "" when there is none.
std::string prefix_fix(const NamedTensors& state, const NamedTensors& own) {
  const std::set<std::string> own_keys = key_set(own);
  for (std::string prefix = common_dotted_prefix(state); !prefix.empty();) {
    const bool model_has_it = every_key_starts_with(own, prefix);
    const bool leaves_model_keys = std::any_of(
        state.begin(), state.end(), [&](const auto& e) { return own_keys.count(e.first.substr(prefix.size())) > 0; });
    if (!model_has_it && leaves_model_keys)
      return "hint: every key starts with `" + prefix + "`, the model's keys do not: save it without the prefix, " +
             "torch.save({k.removeprefix(\"" + prefix + "\"): v for k, v in sd.items()}, PATH)";
    const size_t dot = prefix.size() < 2 ? std::string::npos : prefix.rfind('.', prefix.size() - 2);
    prefix = dot == std::string::npos ? "" : prefix.substr(0, dot + 1);
  }
  return "";
}

// The fix when the file's keys are exactly another model.name's; else a note on how few keys match.
std::string architecture_fix(const NamedTensors& state, const NamedTensors& own, const ModelConfig& model_cfg) {
  const std::set<std::string> file_keys = key_set(state), own_keys = key_set(own);
  if (file_keys == own_keys)
    return "hint: same keys, other shapes: the file comes from this architecture with "
           "other sizes (model.num_classes, model.in_channels)";
  for (const ModelKind* kind : model_kinds()) {  // the models built without a file of their own
    const std::string name(kind->row.name);
    if (name == model_cfg.name.name || kind->row.reads_file()) continue;
    ModelConfig other = model_cfg;
    other.name.name = name;
    if (key_set(module_state(*kind->make(other))) == file_keys)
      return "hint: the keys are those of model.name = \"" + name + "\" (--model.name=" + name + ")";
  }
  size_t shared = 0;
  for (const auto& k : file_keys) shared += own_keys.count(k);
  if (shared * 2 >= own_keys.size()) return "";
  return "hint: only " + std::to_string(shared) + " of the model's " + std::to_string(own_keys.size()) +
         " keys are in the file: it looks like a different architecture than model.name = \"" + model_cfg.name.name +
         "\"";
}

// model.reset_head: the file's head entries give way to the module's own (freshly initialised) ones, whatever their
// shapes; every other entry is still loaded strictly.
std::string replace_head(NamedTensors& state, const Classifier& model) {
  const std::string prefix = model.head_name() + ".";
  size_t dropped = 0;
  for (auto it = state.begin(); it != state.end();) {
    if (it->first.rfind(prefix, 0) == 0) {
      it = state.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  for (const auto& entry : module_state(model))
    if (entry.first.rfind(prefix, 0) == 0) state.push_back(entry);
  return model.head_name() + " re-initialised (" + std::to_string(dropped) + " of the file's entries left out)";
}

// The wrappers whose prefix every key of a saved model carries: DDP's module, torch.compile's OptimizedModule.
struct WrapperPrefix {
  const char* prefix;
  const char* wrapper;
};
constexpr WrapperPrefix kWrapperPrefixes[] = {{"module.", "DDP"}, {"_orig_mod.", "torch.compile"}};

// The file's state dict: a safetensors file's tensors, or a torch.save file's (unwrapped as unwrap_init_state says).
InitLayout read_init_state(const std::string& path) {
  if (is_safetensors_file(path)) return {read_safetensors(path).tensors, "safetensors"};
  return unwrap_init_state(read_torch_save_file(path), path);
}

}  // namespace

std::string load_init_weights(Classifier& module, const ModelConfig& model_cfg, const std::string& path) {
  InitLayout layout = read_init_state(path);
  const auto add_note = [&](const std::string& note) { layout.note += (layout.note.empty() ? "" : ", ") + note; };
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const WrapperPrefix& w : kWrapperPrefixes)
      if (!layout.state.empty() && every_key_starts_with(layout.state, w.prefix)) {
        for (auto& entry : layout.state) entry.first.erase(0, std::strlen(w.prefix));
        add_note(std::string(w.wrapper) + " state dict, `" + w.prefix + "` prefix stripped");
        stripped = true;
      }
  }
  if (model_cfg.reset_head) add_note(replace_head(layout.state, module));
  try {
    apply_state(module, layout.state, path);
  } catch (const std::runtime_error& e) {
    const NamedTensors own = module_state(module);
    std::string fix = prefix_fix(layout.state, own);
    if (fix.empty()) fix = architecture_fix(layout.state, own, model_cfg);
    throw std::runtime_error(std::string(e.what()) + (fix.empty() ? "" : "; " + fix));
  }
  return layout.note;
}

}  // namespace ddp
