// in_process_rank: one rank of a Gloo group whose ranks are threads of this process, meeting in one HashStore.
#pragma once

#include "distributed/context.h"
#include "distributed/process_group.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

namespace ddp::test {

inline DistContext in_process_rank(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
  DistContext ctx;
  ctx.rank = rank;
  ctx.world_size = world;
  ctx.backend = "gloo";
  ctx.group = make_process_group(
      store, rank, world,
      {{c10::DeviceType::CPU, "gloo", make_gloo_backend(store, rank, world, std::chrono::seconds(30), {"lo"})}});
  return ctx;
}

}  // namespace ddp::test
