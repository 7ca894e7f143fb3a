// batch_norm_collectives: SyncBatchNorm's all_gather and all_reduce over the job's process group.
#pragma once

#include "distributed/context.h"
#include "models/batch_norm.h"

namespace ddp {

// The collectives of model.sync_batchnorm on ctx's process group (a world of one needs none: its BatchNorm layers
// normalise their own batch, as SyncBatchNorm falls back to F.batch_norm alone).
c10::intrusive_ptr<BatchNormCollectives> batch_norm_collectives(const DistContext& ctx);

}  // namespace ddp
