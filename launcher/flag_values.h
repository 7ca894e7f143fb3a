// ddprun's flag value parsers: integers, seconds, node ranges, endpoints, signals, streams, --rdzv-conf's keys.
#pragma once

#include "launcher/options.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

// What --nproc-per-node's words count on this node, asked only when a word needs it.
struct NodeCounts {
  std::function<int64_t()> gpus;  // CUDA devices the workers can use (0 without CUDA, or in a CPU-only build)
  std::function<int64_t()> cpus;  // CPUs this process may run on
};

// Each throws LaunchUsageError naming `flag` and the value when the value does not fit.
int64_t parse_integer(const std::string& flag, const std::string& v, int64_t min, int64_t max);
// Seconds >= 0 and at most a week.
double parse_seconds(const std::string& flag, const std::string& v);
bool parse_bool(const std::string& flag, std::string v);
// "N" or torchrun's elastic "MIN:MAX": {MIN, MAX}.
std::pair<int64_t, int64_t> parse_nnodes(const std::string& v);
// "HOST[:PORT]" ("[v6]:PORT" too); the port defaults to `default_port`.
std::pair<std::string, int> parse_endpoint(const std::string& flag, const std::string& v, int default_port);
// "SIGTERM,SIGUSR1" (torchrun's form; "TERM" and lower case also do): the signals a launcher can forward.
std::vector<int> parse_signals(const std::string& flag, const std::string& v);
// "0,2": local ranks, as torchrun's --local-ranks-filter takes them.
std::vector<int64_t> parse_rank_list(const std::string& flag, const std::string& v);
// A number, or torchrun's words (torch.distributed.run's determine_local_world_size): gpu (CUDA devices; an error
// without any), cpu, auto (GPUs when there are any, else CPUs), counted by `node`.
int64_t parse_nproc(const std::string& v, const NodeCounts& node);
StreamSelection parse_streams(const std::string& flag, const std::string& v);
// torchrun's --rdzv-conf "key=value,..." (timeout is the static rendezvous' name for join_timeout).
RendezvousConf parse_rdzv_conf(const std::string& v, RendezvousConf conf);

}  // namespace ddp
