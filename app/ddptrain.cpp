// ddptrain entry logic: argument parsing, config loading, rendezvous, training, and exit codes.
#include "app/ddptrain.h"

#include "base/c10_logging.h"
#include "base/cpus.h"
#include "data/shard_index.h"
#include "data/shard_patterns.h"
#include "data/shard_writer.h"
#include "config/config.h"
#include "train/linked_kinds.h"
#include "train/preemption.h"
#include "train/trainer.h"
#include "report/metrics_table.h"
#include "report/version.h"
#include "base/first_line.h"
#include "distributed/process_group.h"
#include "base/process_env.h"
#include "distributed/group_connect.h"
#include "distributed/hang_watch.h"
#include "distributed/rendezvous.h"
#include "distributed/shm/shm_allreduce.h"

#include <cstdlib>
#include <iostream>

namespace ddp {

std::string usage() {
  return "usage: ddptrain CONFIG.toml [--section.key=value | --section.key value | --section.flag ...]\n"
         "  Trains as configured; joins a distributed job when RANK/WORLD_SIZE (torchrun), SLURM_* or\n"
         "  OMPI_COMM_WORLD_* variables are set, else runs as a world of one (under srun MASTER_ADDR/MASTER_PORT\n"
         "  default to the node list's first host and a port from SLURM_JOB_ID). The config file may come before or\n"
         "  after the overrides; a bool key given alone (--training.deterministic) means true.\n"
         "  --print-config   print the resolved configuration (every key) and exit\n"
         "  --help-markdown  print the config key reference as docs/configuration.md's Markdown table and exit\n"
         "  --help-metrics-markdown  print the metrics.jsonl fields and TensorBoard tags as docs/metrics.md's\n"
         "                   Markdown table and exit\n"
         "  --eval-only      evaluate model.init_from (or the initial weights) on the test split and exit\n"
         "  --index-shards PATTERN  write the index SHARD.ddpidx beside each local tar shard PATTERN names (brace\n"
         "                   patterns joined by \"::\", as data.train_shards) and exit; no config is read\n"
         "  --make-shards OUT_DIR  pack the config's image_folder or cifar10 dataset into WebDataset tar shards\n"
         "                   OUT_DIR/{train,val}-NNNNNN.tar with their indexes and exit; --shard-size MB: each\n"
         "                   shard's size (default 256)\n"
         "  --version        print ddptrain's, LibTorch's and the CUDA/cuDNN/NCCL versions, and the GPUs visible\n"
         "  --help, -h       this text and every config key with its type, default and allowed values\n";
}

namespace {

// One override flag (args[i] starts with "--" and names section.key before any '='), as "section.key=value":
// --a.b=VALUE as written; --a.b VALUE takes the next argument; a bool key alone is true, and takes a following
// true/false (a bool/auto key also "auto"). Advances i past a consumed value.
std::string cli_override(const std::vector<std::string>& args, size_t& i) {
  const std::string& a = args[i];
  if (a.find('=') != std::string::npos) return a.substr(2);
  const std::string path = a.substr(2);
  const bool has_next = i + 1 < args.size();
  const KeyKind kind = override_kind(path, a);
  if (kind == KeyKind::Bool || kind == KeyKind::BoolOrAuto) {
    const bool word = has_next && (args[i + 1] == "true" || args[i + 1] == "false" ||
                                   (kind == KeyKind::BoolOrAuto && args[i + 1] == "auto"));
    if (word) return path + "=" + args[++i];
    return path + "=true";
  }
  if (!has_next) throw ConfigError(a + ": needs a value (" + a + " VALUE or " + a + "=VALUE)");
  if (args[i + 1].rfind("--", 0) == 0)
    throw ConfigError(a + ": needs a value, got option " + args[i + 1] + " (a value that starts with -- goes as " + a +
                      "=VALUE)");
  return path + "=" + args[++i];
}

// What the value of a tool's option is ("--index-shards PATTERN"), or null for another argument.
const char* tool_option(const std::string& a) {
  const std::string name = a.substr(0, a.find('='));
  if (name == "--index-shards") return "the shards' PATTERN";
  if (name == "--make-shards") return "the OUT_DIR to write the shards to";
  if (name == "--shard-size") return "a size in MB above 0 (a shard's bytes, about)";
  return nullptr;
}

// The error line in one write: under mpirun --tag-output (or ranks sharing a terminal) a line written in pieces is
// tagged and interleaved piece by piece.
void write_error_line(const std::string& line) { std::cerr << line + "\n" << std::flush; }

}  // namespace

CliArgs parse_cli(const std::vector<std::string>& args) {
  CliArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.help = true;
    } else if (a == "--version") {
      out.version = true;
    } else if (a == "--help-markdown") {
      out.help_markdown = true;
    } else if (a == "--help-metrics-markdown") {
      out.help_metrics_markdown = true;
    } else if (a == "--print-config") {
      out.print_config = true;
    } else if (a == "--eval-only") {
      out.eval_only = true;
    } else if (const char* what = tool_option(a)) {
      const std::string name = a.substr(0, a.find('='));
      std::string value;
      if (a.find('=') != std::string::npos) {
        value = a.substr(a.find('=') + 1);
      } else {
        if (i + 1 == args.size() || args[i + 1].rfind("--", 0) == 0) throw ConfigError(name + ": needs " + what);
        value = args[++i];
      }
      if (name == "--index-shards") {
        out.index_shards = value;
      } else if (name == "--make-shards") {
        out.make_shards = value;
      } else {
        char* end = nullptr;
        out.shard_size_mb = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(out.shard_size_mb > 0) || out.shard_size_mb > 1e6)
          throw ConfigError("--shard-size " + value + ": needs " + what);
      }
    } else if (a.rfind("--", 0) == 0 && a.find_first_of(".=") != std::string::npos) {
      out.overrides.push_back(cli_override(args, i));
    } else if (a.rfind("-", 0) == 0) {
      throw ConfigError(a + ": unknown option (overrides look like --section.key=value)");
    } else if (out.config_path.empty()) {
      out.config_path = a;
    } else {
      throw ConfigError(a + ": unexpected argument (the config file is " + out.config_path + ")");
    }
  }
  if (out.config_path.empty() && !out.help && !out.help_markdown && !out.help_metrics_markdown && !out.version &&
      out.index_shards.empty())
    throw ConfigError("missing CONFIG.toml argument");
  return out;
}

int ddptrain_main(const std::vector<std::string>& args) {
  quiet_c10_logging();
  std::string prefix;
  DistContext ctx;
  try {
    hand_down_linked_kinds();
    CliArgs cli = parse_cli(args);
    if (cli.help) {
      std::cout << usage() << "\n" << config_help();
      return 0;
    }
    if (cli.help_markdown) {
      std::cout << config_markdown();
      return 0;
    }
    if (cli.help_metrics_markdown) {
      std::cout << metrics_markdown();
      return 0;
    }
    if (cli.version) {
      std::cout << version_text();
      return 0;
    }
    if (!cli.index_shards.empty()) {
      std::vector<std::string> shards;
      try {
        shards = expand_shard_patterns(cli.index_shards);
      } catch (const std::invalid_argument& e) {
        throw ConfigError(std::string("--index-shards: ") + e.what());
      }
      index_shard_files(shards, available_cpus(), [](const std::string& line) {
        std::cout << line + "\n" << std::flush;
      });
      return 0;
    }
    Config cfg = load_config(cli.config_path, cli.overrides);
    if (cli.print_config) {
      std::cout << format_config(cfg);
      return 0;
    }
    if (!cli.make_shards.empty()) {
      make_shards(cfg, cli.make_shards, static_cast<int64_t>(cli.shard_size_mb * 1e6), [](const std::string& line) {
        std::cout << line + "\n" << std::flush;
      });
      return 0;
    }
    RendezvousInfo info = rendezvous_from_env(process_env());
    info.config_digest = config_digest(format_config(cfg)).substr(0, 16);
    if (info.world_size > 1) prefix = "[rank " + std::to_string(info.rank) + "] ";
    // PyTorch's CUDA Graphs notes for DDP: NCCL's asynchronous error handling off before the process group exists.
    if (cfg.training.cuda_graph) ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", 1);
    ctx = init_distributed(info, cfg.dist);
    const auto hang_watch = HangWatch::start(
        ctx, cfg.dist.hang_report_after_s(), cfg.job.out_dir + "/hang",
        [prefix](const std::string& line) { write_error_line(prefix + "warning: " + line); },
        [prefix](const std::string& line) {
          // Another rank failed and this one waits for it in a collective that may never end (no reset comes
          // from a pair that never connected): the process ends from the watch's thread.
          write_error_line(prefix + "error: " + line);
          std::fflush(nullptr);
          std::_Exit(1);
        });
    // From here SIGTERM/SIGINT mean "checkpoint at the next step and exit 0" (SIGUSR1: exit 75, for requeue);
    // before (rendezvous, a peer that never comes) they keep their default action so a launcher can stop a waiting
    // rank at once.
    install_preemption_handlers();
    Trainer trainer(cfg, ctx);
    trainer.setup();
    if (cli.eval_only) {
      trainer.evaluate_only();
    } else {
      trainer.resume();
      trainer.train();
    }
    shutdown_group(ctx.group);  // NCCL communicators and Gloo's threads end here, not in static destruction
    return trainer.exit_code();
  } catch (const ConfigError& e) {
    write_error_line(prefix + "error: " + e.what());
    if (std::string(e.what()).find("missing CONFIG") != std::string::npos) std::cerr << usage();
    tell_peers_of_failure(ctx, first_line(e.what()));
    return 2;
  } catch (const std::exception& e) {
    // c10::Error carries a C++ backtrace after the first line; users get the message.
    std::string first = first_line(e.what());
    // Gloo says how long it waited (or that a timeout closed the connection), not which setting that was.
    if ((first.find("gloo") != std::string::npos && first.find("Timed out waiting") != std::string::npos) ||
        first.find("Application timeout caused pair closure") != std::string::npos)
      first += " (a collective did not complete within dist.timeout_s: a peer is stuck or too slow)";
    // Gloo names a peer's address when it vanishes; the rank that ran there is what the user needs. Not when the
    // all-reduce between nodes failed: this node's ranks then leave after this one, and the cause is another node.
    if (ctx.gone_peers && first.find(kBetweenNodesFailed) == std::string::npos &&
        (first.find("Connection closed by peer") != std::string::npos ||
         first.find("Connection reset by peer") != std::string::npos || first.find("Broken pipe") != std::string::npos))
      if (const std::string gone = ctx.gone_peers(std::chrono::seconds(1)); !gone.empty())
        first = gone + " (" + first + ")";
    // Gloo connects a pair at its first message under TORCH_GLOO_LAZY_INIT: a published address that cannot be
    // reached shows here, not when the group is made.
    if (const std::string hint = gloo_connect_hint(first);
        !hint.empty() && first.find("GLOO_SOCKET_IFNAME") == std::string::npos)
      first += " (" + hint + ")";
    write_error_line(prefix + "error: " + first);
    tell_peers_of_failure(ctx, first);
    return 1;
  }
}

}  // namespace ddp
