// ddprun's command line: finds each argument's row in the flag table, applies it, and checks the flags together.
#include "launcher/command_line.h"

#include "base/cpus.h"
#include "distributed/rendezvous.h"
#include "launcher/flag_env.h"
#include "launcher/flags.h"

#include <torch/cuda.h>

#include <algorithm>
#include <set>
#include <tuple>

namespace ddp {
namespace {

// The row that `written` (dashes or underscores; "-r" style aliases as such) names, or nullptr. `name` gets the
// flag's name without leading dashes.
const FlagRow* find_flag(std::string written, std::string* name) {
  std::replace(written.begin(), written.end(), '_', '-');
  for (const FlagRow& row : launch_flags())
    for (const char* alias : row.aliases)
      if (alias[0] == '-' && written == alias) return &row;
  *name = written.substr(written.find_first_not_of('-'));
  for (const FlagRow& row : launch_flags()) {
    if (*name == row.name) return &row;
    for (const char* alias : row.aliases)
      if (*name == alias) return &row;
  }
  return nullptr;
}

[[noreturn]] void refuse_unknown(const std::string& written, const std::string& name) {
  for (const TorchrunOnlyFlag& f : torchrun_only_flags())
    if (name == f.name) throw LaunchUsageError(written + ": torchrun's flag, not supported by ddprun: " + f.instead);
  throw LaunchUsageError(written + ": unknown flag (ddprun --help lists them)");
}

void validate(const LaunchOptions& o) {
  if (o.help) return;
  if (o.program.empty()) throw LaunchUsageError("missing PROGRAM (ddprun [flags] [--] PROGRAM [ARGS...])");
  if (o.standalone && o.nnodes > 1)
    throw LaunchUsageError("--standalone runs one node; it cannot be combined with --nnodes=" +
                           std::to_string(o.nnodes));
  if (o.rdzv_backend != "static" && o.rdzv_backend != "c10d")
    throw LaunchUsageError("--rdzv-backend=" + o.rdzv_backend + ": expected static or c10d");
  if (elastic(o) && o.rdzv_host.empty())
    throw LaunchUsageError("--rdzv-backend=c10d needs --rdzv-endpoint HOST[:PORT] (the host whose ddprun serves the "
                           "rendezvous)");
  if (elastic(o) && o.standalone) throw LaunchUsageError("--standalone makes its own rendezvous; drop --rdzv-backend");
  if (!elastic(o) && o.min_nodes != o.nnodes)
    throw LaunchUsageError("--nnodes=" + std::to_string(o.min_nodes) + ":" + std::to_string(o.nnodes) +
                           ": a node range needs --rdzv-backend=c10d --rdzv-endpoint HOST[:PORT]");
  if (o.streams_chosen && o.log_dir.empty()) throw LaunchUsageError("--redirects/--tee need --log-dir");
  if (elastic(o)) return;  // node ranks and the master address are agreed at the rendezvous
  if (o.node_rank >= o.nnodes)
    throw LaunchUsageError("--node-rank=" + std::to_string(o.node_rank) + " is out of range for --nnodes=" +
                           std::to_string(o.nnodes));
  if (o.nnodes > 1 && o.master_port >= 65535)
    throw LaunchUsageError("--master-port=65535: with --nnodes > 1 ddprun also uses master-port + 1");
  if (o.master_addr.empty()) throw LaunchUsageError("--master-addr is empty");
}

}  // namespace

NodeCounts this_node() {
  return {[] { return cuda_build() ? static_cast<int64_t>(torch::cuda::device_count()) : int64_t{0}; },
          [] { return available_cpus(); }};
}

LaunchOptions parse_launch_args(const std::vector<std::string>& args, const NodeCounts& node,
                                const std::map<std::string, std::string>& env) {
  LaunchOptions o;
  std::set<const FlagRow*> given;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // PROGRAM
    const size_t eq = a.find('=');
    const std::string written = a.substr(0, eq);
    std::string name;
    const FlagRow* flag = find_flag(written, &name);
    if (!flag) refuse_unknown(written, name);
    std::string value;
    if (!*flag->value) {
      if (eq != std::string::npos) throw LaunchUsageError(written + " takes no value");
    } else if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) throw LaunchUsageError(written + " needs a value");
      value = args[++i];
    }
    flag->set(o, written, value, node);
    given.insert(flag);
  }
  apply_pet_env(o, given, env, node);
  apply_slurm_defaults(o, given, env, node);
  o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
  // The static backend takes --rdzv-endpoint as node 0's MASTER_ADDR[:MASTER_PORT], as torchrun does.
  if (!elastic(o) && !o.rdzv_endpoint.empty())
    std::tie(o.master_addr, o.master_port) = parse_endpoint("--rdzv-endpoint", o.rdzv_endpoint, o.master_port);
  if (o.monitor_interval_s <= 0) throw LaunchUsageError("--monitor-interval must be > 0 seconds");
  validate(o);
  return o;
}

}  // namespace ddp
