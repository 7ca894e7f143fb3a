// The config a checkpoint was written with (entries "config" and "config_hash"), and whether a resuming run has it.
#pragma once

#include "config/config.h"

#include <ATen/core/Dict.h>

namespace ddp {

// Adds "config" (every key, as --print-config writes it) and "config_hash" (config_digest of the keys a resumed run
// must keep, format_resume_config).
void add_config_snapshot(c10::impl::GenericDict& out, const Config& cfg);

// The checkpoint was written with cfg, up to the keys a resumption may change. A matching hash says so at once;
// otherwise the checkpoint's "config" text is read back and compared, so that a config printed differently but
// meaning the same (an alias such as amp.dtype = "fp16", or a hash made another way by an older ddptrain) is the
// same. No hash (a Python checkpoint): nothing to compare, true.
bool written_with(const c10::impl::GenericDict& state, const Config& cfg);

}  // namespace ddp
