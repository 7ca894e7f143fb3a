// apply_pet_env (torchrun's PET_<DEST> variables for absent flags) and apply_slurm_defaults (srun's node count,
// node id and node list).
#include "launcher/flag_env.h"

#include "distributed/slurm_master.h"

#include <string>

namespace ddp {
namespace {

const FlagRow& flag_row(const std::string& name) {
  for (const FlagRow& row : launch_flags())
    if (name == row.name) return row;
  throw std::logic_error("no ddprun flag " + name);
}

bool given_anywhere(const FlagRow& row, const std::set<const FlagRow*>& given,
                    const std::map<std::string, std::string>& env) {
  const auto it = env.find(row.pet_env);
  return given.count(&row) || (it != env.end() && !it->second.empty());
}

// Applies `value` to `row` as if given as --NAME=value, an error naming `variable` and the value.
void set_from(LaunchOptions& o, const FlagRow& row, const std::string& variable, const std::string& value,
              const NodeCounts& node) {
  try {
    row.set(o, std::string("--") + row.name, value, node);
  } catch (const LaunchUsageError& e) {
    throw LaunchUsageError("environment variable " + variable + "=\"" + value + "\": " + e.what());
  }
}

// check_env's reading: bool(int(value)), so a nonzero integer turns the switch on.
bool switch_value(const std::string& variable, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size()) return v != 0;
  } catch (const std::exception&) {
  }
  throw LaunchUsageError("environment variable " + variable + "=\"" + value +
                         "\": expected an integer (0 = off, another = on, as torchrun reads it)");
}

}  // namespace

void apply_pet_env(LaunchOptions& o, const std::set<const FlagRow*>& given,
                   const std::map<std::string, std::string>& env, const NodeCounts& node) {
  for (const FlagRow& row : launch_flags()) {
    if (!*row.pet_env || given.count(&row)) continue;
    const auto it = env.find(row.pet_env);
    if (it == env.end() || it->second.empty()) continue;
    if (!*row.value) {
      if (switch_value(it->first, it->second)) row.set(o, std::string("--") + row.name, "", node);
    } else {
      set_from(o, row, it->first, it->second, node);
    }
  }
}

void apply_slurm_defaults(LaunchOptions& o, const std::set<const FlagRow*>& given,
                          const std::map<std::string, std::string>& env, const NodeCounts& node) {
  const auto set = [&](const char* variable) {
    const auto it = env.find(variable);
    return it != env.end() && !it->second.empty();
  };
  if (!set("SLURM_STEP_NUM_NODES")) return;
  // --standalone, or --nnodes=1 given: each task of the step runs a job of its own, as torchrun (which reads no SLURM_
  // variable) runs it there.
  if (o.standalone || (given_anywhere(flag_row("nnodes"), given, env) && o.nnodes == 1 && o.min_nodes == 1)) return;
  const auto take = [&](const char* flag, const char* variable) {
    const FlagRow& row = flag_row(flag);
    if (set(variable) && !given_anywhere(row, given, env)) set_from(o, row, variable, env.at(variable), node);
  };
  take("nnodes", "SLURM_STEP_NUM_NODES");
  take("node-rank", "SLURM_NODEID");
  if (set("MASTER_ADDR")) {
    take("master-addr", "MASTER_ADDR");
  } else if (!given_anywhere(flag_row("master-addr"), given, env)) {
    try {
      const SlurmFirstHost first = slurm_first_host(env);
      if (!first.host.empty()) o.master_addr = first.host;
    } catch (const std::exception& e) {
      throw LaunchUsageError(e.what());
    }
  }
}

}  // namespace ddp
