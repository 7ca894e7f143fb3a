// meet: how this node joins the others before each round (torchelastic's _rendezvous) and learns its assignment.
#pragma once

#include "launcher/assignment.h"
#include "launcher/elastic_rendezvous.h"
#include "launcher/options.h"
#include "launcher/outcome.h"
#include "launcher/store.h"

#include <optional>

namespace ddp {

struct Meeting {
  std::optional<RoundAssignment> assignment;  // the round to run
  RoundOutcome ended;                         // without one: why the job ended before it
};

// Meets the other nodes for round `next.round`: with `rendezvous` (c10d) the next round that forms, with the node
// rank, count and master address agreed there; with only a `store` (static, several nodes) once every node arrived;
// alone at once. Either way the ranks follow every node's --nproc-per-node, and the first round (and every c10d
// round) says where this node stands. A stop signal meanwhile ends the job before the workers start.
Meeting meet(const LaunchOptions& o, RoundAssignment next, JobStore* store, ElasticRendezvous* rendezvous);

}  // namespace ddp
