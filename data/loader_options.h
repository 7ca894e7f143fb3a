// The loader a run's [data] section configures: its LoaderOptions, and the threads data.workers = "auto" means.
#pragma once

#include "config/config.h"
#include "data/loader.h"

namespace ddp {

// data.workers as a number of threads: the number given, or for "auto" the CPUs left to the rank, `cpus` (those
// this process may run on) over the `local_ranks` sharing them less the rank's `training_threads`, at least 1 and at
// most 64 (the key's range).
int64_t resolve_workers(const IntOrAuto& workers, int64_t cpus, int64_t local_ranks, int64_t training_threads);

// The loader of a rank training on `device` (DataLoader(batch_size, drop_last, num_workers=workers,
// pin_memory) with ToTensor + Normalize): data.prefetch batches ahead, data.mean and data.std; normalised on the
// loader threads for the CPU, left uint8 in page-locked memory (data.pin_memory) for a CUDA device, which
// normalises them; batches in `memory_format`, the layout the model takes; an image folder's JPEGs left for the device
// to decode where data.decode says so (decode_on_device, which throws where "gpu" cannot run).
LoaderOptions configured_loader(const DataConfig& data, int64_t batch_size, bool drop_last, int64_t workers,
                                c10::Device device, torch::MemoryFormat memory_format, uint64_t seed);

}  // namespace ddp
