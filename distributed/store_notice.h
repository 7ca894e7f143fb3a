// post_notice and read_notice: a line one rank leaves in the job's store for the others, kept there until they have
// read it when the poster's exit would take the store with it.
#pragma once

#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ddp {

// Posts `text` under `key` unless a notice is there already (the first one stays: later ones are most often its
// consequences) and counts this rank under `key`/count. With `wait_for_readers` (this process serves the store:
// rank 0 without a launcher's store), then waits until `world` ranks are counted, posters and readers alike, giving
// readers that look every `reader_poll` two of their polls. The requests run on a thread of their own and the call
// returns within a second (and those two polls) whatever they do: a request to a store behind a silent link waits
// for its answer without a bound. A store that is gone ends it at once.
void post_notice(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, const std::string& text,
                 int64_t world, bool wait_for_readers, std::chrono::milliseconds reader_poll);

// What is posted under `key`, and this reader counted; throws when the store is gone before the notice is read.
std::string read_notice(c10d::Store& store, const std::string& key);

// Counts this rank as a reader of the notice under `key`, for a rank that read the key itself and found there a
// notice whose poster may wait for it (a verdict that is a failure, where a success is not waited on).
void count_notice_read(c10d::Store& store, const std::string& key);

// post_notice's `reader_poll` where the readers wait for the key in the store instead of polling: a rank slow to be
// scheduled gets two seconds beyond the notice's own.
inline constexpr std::chrono::milliseconds kReadersWaitInTheStore{1000};

}  // namespace ddp
