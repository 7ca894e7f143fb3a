// launch_job: makes the job secret and the workers' environment, serves or joins the job store, runs the agent loop.
#include "launcher/ddprun.h"

#include "base/first_line.h"
#include "base/process_env.h"
#include "distributed/sealed_store/sealed_store.h"
#include "launcher/agent.h"
#include "launcher/env.h"
#include "launcher/host_address.h"
#include "launcher/output.h"
#include "launcher/process.h"
#include "launcher/signals.h"

#include <memory>
#include <random>

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

// Round 0's assignment before the nodes meet: the flags' node rank and master (--standalone: 127.0.0.1, a free port
// and a random run id, as torchrun's --standalone picks its own rendezvous).
RoundAssignment first_assignment(const LaunchOptions& o) {
  // round, restart_count, node_rank, nnodes, first_rank, world_size, master_addr, master_port, run_id
  if (!o.standalone) return {0, 0, o.node_rank, o.nnodes, 0, 1, o.master_addr, o.master_port, o.run_id};
  const RoundAssignment a{0, 0, o.node_rank, o.nnodes, 0, 1, "127.0.0.1", free_port("127.0.0.1"), random_run_id()};
  launcher_log("standalone: MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(a.master_port) +
               " TORCHELASTIC_RUN_ID=" + a.run_id);
  return a;
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

}  // namespace

int launch_job(const LaunchOptions& o, const std::string& program_path) {
  AgentJob job{program_path, process_env(), first_assignment(o), nullptr, nullptr};
  auto& env = job.env;
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
  bool joined = false;  // the job at the store is this node's (its flags are the job's)
  try {
    if (store) store->check_same_job(o);
    joined = true;
    // Until here a signal ends ddprun at once (no workers yet; connecting to node 0 may take a while).
    install_launcher_signal_handlers(o.signals_to_handle);
    become_child_subreaper();
    if (rendezvous)
      launcher_log("joining rendezvous '" + o.run_id + "' at " + store->address() + " as " + rendezvous->local_addr() +
                   (store->serves() ? " (this ddprun serves it)" : "") + ", --nnodes " + std::to_string(o.min_nodes) +
                   ":" + std::to_string(o.nnodes));
    job.store = store.get();
    job.rendezvous = rendezvous.get();
    code = run_agent(o, job);
  } catch (const std::exception& e) {
    if (store) {
      // With c10d a node refused for other flags was never the job's: the job at the endpoint goes on.
      try {
        if (joined || !elastic(o))
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

}  // namespace ddp
