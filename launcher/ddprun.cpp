// ddprun launcher: parses flags, prepares the workers' environment, runs restart rounds and decides the exit code.
#include "launcher/ddprun.h"

#include "base/exit_codes.h"
#include "base/c10_logging.h"

#include "launcher/elastic_rendezvous.h"
#include "launcher/env.h"
#include "launcher/host_address.h"
#include "launcher/options.h"
#include "launcher/process.h"
#include "launcher/round.h"
#include "launcher/signals.h"
#include "launcher/store.h"
#include "base/first_line.h"
#include "base/process_env.h"
#include "distributed/rendezvous.h"
#include "distributed/sealed_store/sealed_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <thread>

namespace ddp {
namespace {

std::string random_run_id() {
  std::random_device rd;
  const char* hex = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) id += '-';
    id += hex[rd() % 16];
  }
  return id;
}

bool interrupted() { return received_stop_signal() != 0; }

// After this node's workers all exited 0: waits until every node has (torchrun's exit barrier), or for a
// failure or stop that another node reports meanwhile.
RoundResult exit_barrier(JobStore& store, int64_t round) {
  RoundResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  try {
    store.report_done(round);
    while (!store.all_done(round)) {
      if (auto failed = store.failure(round)) return {RoundEnd::kPeerFailed, *failed, 0};
      if (auto why = store.stopped()) return {RoundEnd::kPeerStopped, *why, 0};
      if (interrupted()) return {RoundEnd::kSucceeded, "", received_stop_signal()};
      if (std::chrono::steady_clock::now() >= deadline) {
        launcher_log("warning: the other nodes did not finish within 300 s of this one; exiting");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    return {RoundEnd::kStoreLost,
            "lost contact with node 0's ddprun at " + store.address() + ": " + first_line(e.what()), 0};
  }
  return result;
}

// prefix + "node 1 of 2: ranks 2..3 of 4, MASTER_ADDR=... MASTER_PORT=..." + suffix.
void log_node(const LaunchOptions& o, const std::string& prefix, const std::string& suffix) {
  const int64_t first = o.first_rank, last = first + o.nproc_per_node - 1;
  launcher_log(prefix + "node " + std::to_string(o.node_rank) + " of " + std::to_string(o.nnodes) + ": " +
               (first == last ? "rank " + std::to_string(first)
                              : "ranks " + std::to_string(first) + ".." + std::to_string(last)) +
               " of " + std::to_string(o.world_size) + ", MASTER_ADDR=" + o.master_addr +
               " MASTER_PORT=" + std::to_string(o.master_port) + suffix);
}

// The options one round's workers see: the node rank, node count, ranks and master address agreed at the rendezvous.
LaunchOptions with_membership(LaunchOptions o, const Membership& m) {
  o.node_rank = m.node_rank;
  o.nnodes = m.nnodes();
  o.master_addr = m.master_addr;
  o.master_port = m.master_port;
  return with_ranks(o, m.local_world_sizes);
}

// Meets the other nodes for round *round (c10d: the next round that forms, written back, with the node rank, count and
// master address agreed there, into *ro; every backend: this node's ranks among the round's, into *ro, and said at
// the first round). Returns ddprun's exit code when the job ended before the round.
std::optional<int> meet(JobStore* store, ElasticRendezvous* rendezvous, int64_t* round, LaunchOptions* ro) {
  if (rendezvous) {
    NoRound none;
    const auto m = rendezvous->join(*round, interrupted, &none);
    if (!m) {
      if (interrupted()) return std::nullopt;  // the caller says so
      launcher_log(none.job_finished ? none.why : "error: " + none.why);
      return none.job_finished ? 0 : 1;
    }
    *round = m->round;
    *ro = with_membership(*ro, *m);
    store->set_membership(m->nnodes(), m->node_rank);
    std::string members;
    for (const auto& n : m->nodes) members += (members.empty() ? "" : ", ") + n;
    log_node(*ro, "rendezvous round " + std::to_string(*round) + ": ", " (nodes: " + members + ")");
  } else if (store) {
    const std::string why = store->join_round(*round, interrupted);
    if (!why.empty() && !interrupted()) {
      launcher_log("error: the job was stopped: " + why);
      return 1;
    }
    if (!why.empty()) return std::nullopt;
    *ro = with_ranks(*ro, store->local_world_sizes(*round));
    if (*round == 0) log_node(*ro, "", ", launchers meet at " + store->address());
  } else {
    *ro = with_ranks(*ro, {ro->nproc_per_node});
    if (*round == 0) log_node(*ro, "", "");
  }
  return std::nullopt;
}

// Rounds until the job succeeds, fails for good or is stopped; returns ddprun's exit code. A round after a failure
// is a restart (TORCHELASTIC_RESTART_COUNT, --max-restarts); with c10d a round that made room for waiting nodes is not.
int run_rounds(const LaunchOptions& o, const std::string& program_path, const std::map<std::string, std::string>& env,
               JobStore* store, ElasticRendezvous* rendezvous) {
  int64_t restarts = 0;
  for (int64_t round = 0;; ++round) {
    LaunchOptions ro = o;
    if (const auto code = meet(store, rendezvous, &round, &ro)) return *code;
    if (interrupted()) {
      launcher_log("stopped by " + signal_name(received_stop_signal()) + " before the workers started");
      if (store) store->report_stopped("node " + std::to_string(ro.node_rank) + "'s ddprun was interrupted");
      return 128 + received_stop_signal();
    }
    RoundResult r = run_round(ro, restarts, round, program_path, env, store, rendezvous);
    if (rendezvous && r.signal == 0 &&
        (r.end == RoundEnd::kNodesChanged || (r.requeued && rendezvous->scale_up_decided()))) {
      launcher_log("the nodes meet again (" + rendezvous->scale_up_decided().value_or(r.reason) + ")");
      continue;
    }
    if (r.end == RoundEnd::kSucceeded && r.requeued) {
      launcher_log("the workers checkpointed before a time limit (SIGUSR1): exit " + std::to_string(kRequeueExitCode) +
                   "; run the same command again to resume");
      return kRequeueExitCode;
    }
    if (store && r.end == RoundEnd::kSucceeded && r.signal == 0) r = exit_barrier(*store, round);
    if (r.signal == SIGUSR1 && r.end == RoundEnd::kSucceeded) return 0;  // the workers finished first
    if (r.signal != 0) {
      launcher_log("stopped by " + signal_name(r.signal));
      return 128 + r.signal;
    }
    switch (r.end) {
      case RoundEnd::kSucceeded:
        if (rendezvous) rendezvous->mark_finished();
        return 0;
      case RoundEnd::kPeerStopped:
        launcher_log("error: the job was stopped: " + r.reason);
        return 1;
      case RoundEnd::kStoreLost:
        launcher_log("error: " + r.reason);
        return 1;
      case RoundEnd::kWorkerFailed:
      case RoundEnd::kPeerFailed:
      case RoundEnd::kNodesChanged:
        break;
    }
    if (restarts < o.max_restarts) {
      ++restarts;
      launcher_log("restarting all " + std::to_string(o.nproc_per_node) + " local worker(s): restart " +
                   std::to_string(restarts) + " of --max-restarts " + std::to_string(o.max_restarts) +
                   " (TORCHELASTIC_RESTART_COUNT=" + std::to_string(restarts) + ")" +
                   (rendezvous ? " after the nodes meet again" : ""));
      continue;
    }
    launcher_log("error: the job failed: " + r.reason +
                 (o.max_restarts > 0
                      ? "; no restarts left (--max-restarts " + std::to_string(o.max_restarts) + " used up)"
                      : ""));
    return 1;
  }
}

// The serving ddprun (static: node 0) stays until the others are done with its store; they say goodbye.
void leave_store(const LaunchOptions& o, JobStore& store, ElasticRendezvous* rendezvous) {
  try {
    if (!store.serves()) {
      store.leave();
    } else if (rendezvous) {
      store.wait_for_others_to_leave(rendezvous->agents_to_wait_for(), o.rdzv_conf.close_timeout, interrupted);
    } else {
      std::vector<int64_t> nodes;
      for (int64_t n = 1; n < o.nnodes; ++n) nodes.push_back(n);
      store.wait_for_others_to_leave(nodes, o.grace_period_s + 10, interrupted);
    }
  } catch (const std::exception&) {
  }
}

int launch(LaunchOptions o, const std::string& program_path) {
  if (o.standalone) {
    o.master_addr = "127.0.0.1";
    o.master_port = free_port("127.0.0.1");
    o.run_id = random_run_id();
    launcher_log("standalone: MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(o.master_port) +
                 " TORCHELASTIC_RUN_ID=" + o.run_id);
  }
  auto env = process_env();
  if (env.find("OMP_NUM_THREADS") == env.end()) {
    const int64_t threads = default_omp_threads(o.nproc_per_node);
    env["OMP_NUM_THREADS"] = std::to_string(threads);
    launcher_log("OMP_NUM_THREADS is not set: each worker gets " + std::to_string(threads) + " (" +
                 std::to_string(available_cpus()) + " CPUs / " + std::to_string(o.nproc_per_node) +
                 " worker(s) on this node); set it to override");
  }
  // The job's secret seals the workers' store (and the launchers' across nodes): made here for one node; several
  // nodes need the same one, so it comes from DDPTRAIN_JOB_SECRET in every node's environment.
  std::string secret = env.count("DDPTRAIN_JOB_SECRET") ? env["DDPTRAIN_JOB_SECRET"] : "";
  if (const std::string problem = job_secret_problem(secret); !secret.empty() && !problem.empty())
    throw LaunchUsageError("DDPTRAIN_JOB_SECRET " + problem);
  if (secret.empty() && o.nnodes == 1) secret = make_job_secret();
  if (secret.empty())
    launcher_log(
        "warning: DDPTRAIN_JOB_SECRET is not set: whoever reaches " +
        (elastic(o)
             ? "the rendezvous at " + o.rdzv_host + ":" + std::to_string(o.rdzv_port) + " or rank 0's MASTER_PORT"
             : o.master_addr + " ports " + std::to_string(o.master_port) + "-" + std::to_string(o.master_port + 1)) +
        " can read and write this job's rendezvous; export one secret (openssl rand -hex 32) to every "
        "node's ddprun");
  else
    env["DDPTRAIN_JOB_SECRET"] = secret;
  std::unique_ptr<JobStore> store;
  std::unique_ptr<ElasticRendezvous> rendezvous;
  if (elastic(o)) {
    store = JobStore::at_endpoint(o, secret);
    rendezvous = std::make_unique<ElasticRendezvous>(o, *store);
  } else if (o.nnodes > 1) {
    store = std::make_unique<JobStore>(o, secret);
  }
  int code = 1;
  try {
    if (store) store->check_same_job(o);
    // Until here a signal ends ddprun at once (no workers yet; connecting to node 0 may take a while).
    install_launcher_signal_handlers(o.signals_to_handle);
    become_child_subreaper();
    if (rendezvous)
      launcher_log("joining rendezvous '" + o.run_id + "' at " + store->address() + " as " + rendezvous->local_addr() +
                   (store->serves() ? " (this ddprun serves it)" : "") + ", --nnodes " + std::to_string(o.min_nodes) +
                   ":" + std::to_string(o.nnodes));
    code = run_rounds(o, program_path, env, store.get(), rendezvous.get());
  } catch (const std::exception& e) {
    if (store) {
      try {
        store->report_stopped("node " + std::to_string(store->node_rank()) + ": " + first_line(e.what()));
      } catch (const std::exception&) {
      }
      leave_store(o, *store, rendezvous.get());
    }
    throw;
  }
  if (store) leave_store(o, *store, rendezvous.get());
  return code;
}

}  // namespace

int ddprun_main(const std::vector<std::string>& args) {
  quiet_c10_logging();
  LaunchOptions o;
  std::string program_path;
  try {
    o = parse_launch_args(args);
    if (o.help) {
      std::cout << launch_usage();
      return 0;
    }
    program_path = resolve_program(o.program[0]);
    return launch(o, program_path);
  } catch (const LaunchUsageError& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    launcher_log("error: " + first_line(e.what()));
    return 1;
  }
}

}  // namespace ddp
