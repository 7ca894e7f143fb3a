// write_file_atomic: a file replaced whole or not at all, so a failed write never leaves a partial one in its place.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ddp {

// Atomic file write: PATH.tmp-PID, fsync, rename, fsync of the folder (made if missing).
void write_file_atomic(const std::string& path, const std::vector<char>& bytes);
// The same, with the bytes handed to the sink as `produce` makes them (nothing buffered); an exception from
// produce leaves no file behind.
using ByteSink = std::function<void(const void* data, size_t size)>;
// Where `produce` runs: on the calling thread, or on a thread of its own at idle priority
// (run_this_thread_in_idle_time) while the calling thread makes the file's system calls at its own
// (DirectWriter::write_behind): for a large file written in the background, whose bytes cost CPU to make, beside
// training threads that write files of their own.
enum class Producer { ThisThread, IdleThread };
void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                       Producer producer = Producer::ThisThread);

}  // namespace ddp
