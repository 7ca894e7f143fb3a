// model.init_from: the state-dict layouts Python users save (plain, DDP's module.-prefixed, inside a checkpoint dict).
#pragma once

#include "config/config.h"

#include "models/classifier.h"

#include <string>

namespace ddp {

// Copies the weights in `path` into `module` (built from `model_cfg`). Accepted: a dict of name -> tensor
// (torch.save(model.state_dict())), the same with every key prefixed `module.` (a DDP-wrapped model; stripped),
// and a dict holding one under "model" or "state_dict" (checkpoints, ddptrain's step-*.pt included).
// Returns what was done to the file's layout ("" when it was a plain state dict), e.g.
// "DDP state dict, `module.` prefix stripped". A mismatch throws the missing/unexpected/mis-shaped keys and,
// where one is apparent, the fix (a prefix the model lacks, weights nested under another key, another model.name).
// With model_cfg.reset_head, the file's head (Classifier::head_name) is left out and the module's own kept.
std::string load_init_weights(Classifier& module, const ModelConfig& model_cfg, const std::string& path);

}  // namespace ddp
