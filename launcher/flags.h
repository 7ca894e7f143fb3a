// ddprun's flag table: every flag declared once (spellings, torchrun's flag and PET_ variable, worker variable,
// default, doc, setter).
#pragma once

#include "launcher/flag_values.h"
#include "launcher/options.h"

#include <string>
#include <vector>

namespace ddp {

// One flag. Names are written without dashes; "-r" style aliases keep their single dash. Underscores are
// accepted wherever a name has a dash (torchrun's argparse declares both spellings).
struct FlagRow {
  const char* name;                  // "nproc-per-node"
  std::vector<const char*> aliases;  // other spellings: "rdzv-id", "-r"
  const char* torchrun;              // the torchrun flag it mirrors ("" = ddprun's own)
  // torchrun's variable for the flag when absent: PET_<argparse dest> (torch/distributed/argparse_util.py, actions
  // env and check_env; a switch is on for a nonzero integer); "" = none
  const char* pet_env;
  const char* worker_env;            // the worker variable its value feeds ("" = none)
  const char* value;                 // what it takes, as --help shows it ("" = a switch: no value)
  const char* default_text;          // its default, as --help shows it ("" = none)
  const char* doc;                   // what it does, one line
  // Stores the value (`flag` as written) into `o`; throws LaunchUsageError for a value that does not fit.
  void (*set)(LaunchOptions& o, const std::string& flag, const std::string& value, const NodeCounts& node);
};

// torchrun 2.11's flags that ddprun does not take, and what to do instead.
struct TorchrunOnlyFlag {
  const char* name;
  const char* instead;
};

const std::vector<FlagRow>& launch_flags();
const std::vector<TorchrunOnlyFlag>& torchrun_only_flags();

// --help: the usage line, then every row of launch_flags() with its spellings, value, default, torchrun flag,
// worker variable and doc, then the torchrun flags ddprun lacks.
std::string launch_usage();

}  // namespace ddp
