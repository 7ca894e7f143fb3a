// run_agent: ddprun's agent loop (torchelastic's SimpleElasticAgent._invoke_run): meet, run, restart or end.
#pragma once

#include "launcher/assignment.h"
#include "launcher/elastic_rendezvous.h"
#include "launcher/options.h"
#include "launcher/store.h"

#include <map>
#include <string>

namespace ddp {

// What every round of one job starts from (torchelastic's WorkerSpec beyond the flags).
struct AgentJob {
  std::string program_path;                 // PROGRAM, resolved
  std::map<std::string, std::string> env;   // the workers' environment before torchrun's variables
  RoundAssignment first;                    // round 0 before the nodes meet: the static node rank and master, run id
  JobStore* store = nullptr;                // several nodes: the job store
  ElasticRendezvous* rendezvous = nullptr;  // c10d: the rendezvous over it
};

// Runs rounds until the job succeeds, fails for good or is stopped; returns ddprun's exit code. A round after a
// failure is a restart (TORCHELASTIC_RESTART_COUNT, --max-restarts); with c10d a round that made room for waiting
// nodes is not.
int run_agent(const LaunchOptions& o, const AgentJob& job);

}  // namespace ddp
