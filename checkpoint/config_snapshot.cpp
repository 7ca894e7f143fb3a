// Config snapshot entries of a checkpoint: written with the run's config, compared by meaning on resume.
#include "checkpoint/config_snapshot.h"

#include "checkpoint/checkpoint_entries.h"

namespace ddp {

void add_config_snapshot(c10::impl::GenericDict& out, const Config& cfg) {
  out.insert("config", format_config(cfg));
  out.insert("config_hash", config_digest(format_resume_config(cfg)));
}

bool written_with(const c10::impl::GenericDict& state, const Config& cfg) {
  const c10::IValue* hash = ckpt_optional_entry(state, "config_hash");
  if (!hash) return true;
  const std::string own = format_resume_config(cfg);
  if (hash->isString() && hash->toStringRef() == config_digest(own)) return true;
  const c10::IValue* text = ckpt_optional_entry(state, "config");
  if (!text || !text->isString()) return false;
  try {
    return format_resume_config(parse_config(text->toStringRef(), "the checkpoint's config")) == own;
  } catch (const ConfigError&) {  // keys or values this version no longer reads: a different config
    return false;
  }
}

}  // namespace ddp
