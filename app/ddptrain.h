// ddptrain command line: CONFIG.toml, --section.key=value overrides, --print-config, --help, --version.
#pragma once

#include <string>
#include <vector>

namespace ddp {

struct CliArgs {
  std::string config_path;
  std::vector<std::string> overrides;  // "section.key=value"
  bool print_config = false;
  bool eval_only = false;  // evaluate model.init_from (or the initial weights) and exit
  bool help = false;
  bool help_markdown = false;          // the config key reference as docs/configuration.md's table
  bool help_metrics_markdown = false;  // the metrics table as docs/metrics.md's
  bool version = false;                // --version
  std::string index_shards;            // --index-shards PATTERN: the shards to index
  std::string make_shards;             // --make-shards OUT_DIR: pack the config's dataset into shards there
  double shard_size_mb = 256;          // --shard-size MB
};

// Throws ConfigError (exit code 2) for usage errors.
CliArgs parse_cli(const std::vector<std::string>& args);
std::string usage();

// Runs ddptrain with argv[1..]; returns the process exit code (0 ok, 2 config/usage, 1 other failure).
int ddptrain_main(const std::vector<std::string>& args);

}  // namespace ddp
