// ddprun's flag table (torchrun's flags and meanings) and the --help text generated from it.
#include "launcher/flags.h"

#include <sstream>
#include <tuple>

namespace ddp {
namespace {

using S = const std::string&;
using N = const NodeCounts&;

// Words of `text` on lines of at most `width` characters, each line starting with `indent`.
std::string wrapped(const std::string& text, const std::string& indent, size_t width) {
  std::istringstream words(text);
  std::string out, line;
  for (std::string w; words >> w;) {
    if (!line.empty() && indent.size() + line.size() + 1 + w.size() > width) out += indent + line + "\n", line.clear();
    line += (line.empty() ? "" : " ") + w;
  }
  return line.empty() ? out : out + indent + line + "\n";
}

std::string spelling(const char* name) { return name[0] == '-' ? name : std::string("--") + name; }

}  // namespace

const std::vector<FlagRow>& launch_flags() {
  // One flag, one row.
  // clang-format off
  static const std::vector<FlagRow> rows = {
      {"nnodes", {}, "--nnodes", "PET_NNODES", "GROUP_WORLD_SIZE", "N|MIN:MAX", "1",
       "nodes in the job; a range MIN:MAX needs --rdzv-backend c10d",
       [](LaunchOptions& o, S, S v, N) { std::tie(o.min_nodes, o.nnodes) = parse_nnodes(v); }},
      {"nproc-per-node", {}, "--nproc-per-node", "PET_NPROC_PER_NODE", "LOCAL_WORLD_SIZE", "N|gpu|cpu|auto", "1",
       "workers on this node: gpu = its CUDA devices, cpu = its CPUs, auto = GPUs when it has any, else CPUs",
       [](LaunchOptions& o, S, S v, N node) { o.nproc_per_node = parse_nproc(v, node); }},
      {"node-rank", {}, "--node-rank", "PET_NODE_RANK", "GROUP_RANK", "R", "0",
       "this node's rank, 0..nnodes-1 (c10d assigns it)",
       [](LaunchOptions& o, S f, S v, N) { o.node_rank = parse_integer(f, v, 0, 1 << 20); }},
      {"master-addr", {}, "--master-addr", "PET_MASTER_ADDR", "MASTER_ADDR", "HOST", "127.0.0.1", "node 0's address",
       [](LaunchOptions& o, S, S v, N) { o.master_addr = v; }},
      {"master-port", {}, "--master-port", "PET_MASTER_PORT", "MASTER_PORT", "P", "29500",
       "rank 0's store port; with --nnodes > 1 node 0's ddprun also serves P+1 to coordinate failures and restarts",
       [](LaunchOptions& o, S f, S v, N) { o.master_port = static_cast<int>(parse_integer(f, v, 1, 65535)); }},
      {"standalone", {}, "--standalone", "PET_STANDALONE", "", "", "off",
       "one node on 127.0.0.1 with a free port and a random run id",
       [](LaunchOptions& o, S, S, N) { o.standalone = true; }},
      {"max-restarts", {}, "--max-restarts", "PET_MAX_RESTARTS", "TORCHELASTIC_MAX_RESTARTS", "K", "0",
       "restart all workers up to K times after a failure",
       [](LaunchOptions& o, S f, S v, N) { o.max_restarts = parse_integer(f, v, 0, 1 << 30); }},
      {"log-dir", {}, "--log-dir", "PET_LOG_DIR", "", "DIR", "none",
       "also write each rank's output to DIR/attempt_K/rank_N.log",
       [](LaunchOptions& o, S, S v, N) { o.log_dir = v; }},
      {"redirects", {"-r"}, "--redirects", "PET_REDIRECTS", "", "S", "0",
       "streams that go only to the log files (0 none, 1 stdout, 2 stderr, 3 both; or per local rank: 0:3,1:2)",
       [](LaunchOptions& o, S f, S v, N) { o.redirects = parse_streams(f, v), o.streams_chosen = true; }},
      {"tee", {"-t"}, "--tee", "PET_TEE", "", "S", "0",
       "streams written to the log files and the console (as --redirects)",
       [](LaunchOptions& o, S f, S v, N) { o.tee = parse_streams(f, v), o.streams_chosen = true; }},
      {"rdzv-backend", {}, "--rdzv-backend", "PET_RDZV_BACKEND", "", "static|c10d", "static",
       "static: --node-rank and --master-addr on every node; c10d: every node runs the same command, meets at "
       "--rdzv-endpoint and gets its rank there",
       [](LaunchOptions& o, S, S v, N) { o.rdzv_backend = v; }},
      {"rdzv-endpoint", {}, "--rdzv-endpoint", "PET_RDZV_ENDPOINT", "", "HOST[:PORT]", "none",
       "c10d: the host whose ddprun serves the rendezvous (port 29400 by default); static: node 0's "
       "MASTER_ADDR[:MASTER_PORT]",
       [](LaunchOptions& o, S f, S v, N) {
         o.rdzv_endpoint = v;
         std::tie(o.rdzv_host, o.rdzv_port) = parse_endpoint(f, v, 29400);
       }},
      {"run-id", {"rdzv-id"}, "--rdzv-id", "PET_RDZV_ID", "TORCHELASTIC_RUN_ID", "ID", "none",
       "the job's id; c10d: nodes of one job must name the same", [](LaunchOptions& o, S, S v, N) { o.run_id = v; }},
      {"role", {}, "--role", "PET_ROLE", "ROLE_NAME", "NAME", "default", "the workers' role name",
       [](LaunchOptions& o, S, S v, N) { o.role = v; }},
      {"rdzv-conf", {}, "--rdzv-conf", "PET_RDZV_CONF", "", "K=V,...", "each key's, below",
       "join_timeout (or timeout; 600 s): how long nodes wait for each other; read_timeout (60 s): how long one "
       "request to the launchers' store may take (then the node ends its workers); c10d also: last_call_timeout "
       "(30 s: a round with MIN nodes waits this long for more), close_timeout (30 s), "
       "keep_alive_interval (5 s), keep_alive_max_attempt (3: keep-alives missed before a node is lost), is_host "
       "(serve the endpoint's store here or not; default: when HOST is here)",
       [](LaunchOptions& o, S, S v, N) { o.rdzv_conf = parse_rdzv_conf(v, o.rdzv_conf); }},
      {"local-addr", {}, "--local-addr", "PET_LOCAL_ADDR", "", "ADDR", "the address that routes to the endpoint",
       "c10d: how the other nodes reach this one; rank 0's node is MASTER_ADDR",
       [](LaunchOptions& o, S, S v, N) { o.local_addr = v; }},
      {"monitor-interval", {}, "--monitor-interval", "PET_MONITOR_INTERVAL", "", "S", "0.1 s",
       "how often ddprun checks its workers and the other nodes (> 0)",
       [](LaunchOptions& o, S f, S v, N) { o.monitor_interval_s = parse_seconds(f, v); }},
      {"grace-period", {}, "", "", "", "S", "30 s", "SIGTERM to SIGKILL when stopping workers",
       [](LaunchOptions& o, S f, S v, N) { o.grace_period_s = parse_seconds(f, v); }},
      {"signals-to-handle", {}, "--signals-to-handle", "PET_SIGNALS_TO_HANDLE", "", "LIST",
       "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
       "signals forwarded to the workers (SIGUSR2 also allowed)",
       [](LaunchOptions& o, S f, S v, N) { o.signals_to_handle = parse_signals(f, v); }},
      {"local-ranks-filter", {}, "--local-ranks-filter", "PET_LOCAL_RANKS_FILTER", "", "LIST", "all",
       "only these local ranks' output on the console (log files keep all)",
       [](LaunchOptions& o, S f, S v, N) { o.local_ranks_filter = parse_rank_list(f, v); }},
      {"no-python", {}, "--no-python", "PET_NO_PYTHON", "", "", "",
       "accepted for torchrun compatibility (PROGRAM is always run directly)", [](LaunchOptions&, S, S, N) {}},
      {"help", {"-h"}, "--help", "", "", "", "", "this text", [](LaunchOptions& o, S, S, N) { o.help = true; }},
  };
  // clang-format on
  return rows;
}

const std::vector<TorchrunOnlyFlag>& torchrun_only_flags() {
  static const std::vector<TorchrunOnlyFlag> rows = {
      {"start-method", "each worker is PROGRAM run as a new process (fork + exec); no interpreter to spawn or fork"},
      {"module", "ddprun runs programs, not Python modules: give the program's path"},
      {"m", "ddprun runs programs, not Python modules: give the program's path"},
      {"run-path", "ddprun runs programs, not Python files: give the program's path"},
      {"logs-specs", "--log-dir, --redirects and --tee choose where the workers' output goes"},
      {"event-log-handler", "ddprun writes its events as [ddprun] lines on stderr"},
      {"numa-binding", "bind in PROGRAM's command line (numactl --cpunodebind=N PROGRAM ...)"},
      {"virtual-local-rank", "each worker's LOCAL_RANK is its own"},
      {"duplicate-stdout-filters", "--tee and --local-ranks-filter choose what reaches the console"},
      {"duplicate-stderr-filters", "--tee and --local-ranks-filter choose what reaches the console"},
  };
  return rows;
}

std::string launch_usage() {
  std::string out =
      "usage: ddprun [flags] [--] PROGRAM [ARGS...]\n"
      "  Starts --nproc-per-node copies of PROGRAM with torchrun's worker environment (RANK, LOCAL_RANK,\n"
      "  WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*).\n"
      "  Flags take --flag=value or --flag value; '-' and '_' are interchangeable; each has torchrun's meaning.\n"
      "  A flag not given takes torchrun's PET_ variable when set (PET_NNODES=2: --nnodes=2). Under srun, --nnodes,\n"
      "  --node-rank and --master-addr default to SLURM_STEP_NUM_NODES, SLURM_NODEID and MASTER_ADDR or the node\n"
      "  list's first host.\n"
      "flags:\n";
  for (const FlagRow& f : launch_flags()) {
    std::string line = "  " + spelling(f.name) + (*f.value ? std::string(" ") + f.value : "");
    for (const char* alias : f.aliases) line += ", " + spelling(alias) + (*f.value ? std::string(" ") + f.value : "");
    std::string facts = *f.torchrun ? std::string("torchrun ") + f.torchrun : "ddprun's own";
    if (*f.default_text) facts += std::string("; default ") + f.default_text;
    if (*f.pet_env) facts += std::string("; or ") + f.pet_env;
    if (*f.worker_env) facts += std::string("; sets ") + f.worker_env;
    out += line + (line.size() < 34 ? std::string(34 - line.size(), ' ') : "  ") + "(" + facts + ")\n";
    out += wrapped(f.doc, "      ", 116);
  }
  std::string lacking;
  for (const TorchrunOnlyFlag& f : torchrun_only_flags())
    lacking += std::string(lacking.empty() ? "" : ", ") + (f.name[1] ? "--" : "-") + f.name;
  out += wrapped("torchrun's flags that ddprun lacks are an error saying what to do instead: " + lacking + ".", "  ",
                 116);
  out +=
      "Rank 0 writes to the console as is; other ranks' lines are prefixed [rank N]. If a worker fails,\n"
      "ddprun stops the others (SIGTERM, then SIGKILL), names the rank and shows its last lines.\n"
      "A handled signal is forwarded to the workers and ends the job; SIGUSR1 (a scheduler's time limit ahead)\n"
      "makes ddptrain checkpoint and exit 75, and ddprun exit 75 without a restart, for a requeue.\n"
      "With --nnodes MIN:MAX (c10d) a lost node makes the others stop their workers and meet again; with at\n"
      "least MIN nodes the workers restart at the new world size (a failure: counts against --max-restarts).\n"
      "A node that arrives while the job runs waits; if there is room (MAX), the workers checkpoint at the next\n"
      "step (SIGUSR1) and restart with it (not a failure).\n";
  return out;
}

}  // namespace ddp
