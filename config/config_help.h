// ddptrain --help's key reference: every config key with its type, default and allowed values, from the schema.
#pragma once

#include <string>

namespace ddp {

// One line per key, grouped by section in schema order: "  section.key  TYPE  default VALUE  RANGE-OR-CHOICES".
// Defaults are a default Config's values as --print-config writes them; a key that is resolved from others when
// left unset (data.dir, data.mean, checkpoint.dir, ...) also shows what it resolves to with the other defaults.
std::string config_help();

}  // namespace ddp
