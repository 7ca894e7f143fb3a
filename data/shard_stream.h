// ShardStream: a shard's tar stream read front to back, for shards that cannot be read at a place: the standard
// output of a pipe: command (webdataset's way to read from `aws s3 cp ... -`, `gsutil cat`, ...), and compressed
// shards, local or HTTP (decompressed with libarchive's filters).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct archive;

namespace ddp {

// Where the index of `shard` is read: SHARD.ddpidx beside a file or URL (a URL's query and fragment kept after the
// path: "https://h/a.tar?token=t" -> "https://h/a.tar.ddpidx?token=t"); for "pipe:COMMAND", the same command with its
// last word that contains ".tar" followed by ".ddpidx" ("pipe:aws s3 cp s3://b/train-0001.tar -" -> "pipe:aws s3 cp
// s3://b/train-0001.tar.ddpidx -"). Throws std::invalid_argument for a command with no such word.
std::string index_source(const std::string& shard);

struct ShardFetch;
class UrlBody;

// The whole standard output of the command `source` ("pipe:COMMAND": a pipe shard's index), its exit status checked,
// tried again as data.shard_retries says; StorageError naming it when it cannot be had.
std::string read_command(const std::string& source, const ShardFetch& fetch);

class ShardStream {
 public:
  // Starts reading `shard`: a local file, an http:// or https:// URL (one GET, its body streamed), or "pipe:COMMAND"
  // run by /bin/sh -c in a process group of its own (its standard error goes to ddptrain's), decompressed (gzip,
  // bzip2, xz, zstd) when `compressed`. Throws StorageError naming the shard when it cannot be started (an HTTP error
  // answer, a refused connection).
  ShardStream(const std::string& shard, bool compressed);
  // A command still running is stopped (SIGKILL to its process group) and reaped; a transfer still running, stopped.
  ~ShardStream();
  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  // The next n bytes into `out`. Throws StorageError naming the shard (and what a command's exit said) when the stream
  // ends first or cannot be read.
  void read(char* out, size_t n);
  void skip(int64_t n);
  // Reads to the end and checks how it ended: a command's exit status must be 0, a transfer whole. Throws StorageError
  // otherwise.
  void finish();
  // What is left, read to the end and checked as finish() checks it; StorageError past `limit` bytes.
  std::string rest(size_t limit);
  int64_t position() const { return position_; }

 private:
  size_t read_some(char* out, size_t n);  // 0 at the end
  // Reads to the end (into `out` when not null, at most `limit` bytes) and checks how the stream ended.
  void drain(std::string* out, size_t limit);
  // "shard SHARD: ..." with how a command ended, once it has (waited for).
  [[noreturn]] void fail(const std::string& what);
  void open(bool compressed);
  void release();       // frees the reader, closes the stream, stops and reaps the command
  std::string ended();  // waits for the command or the transfer; "" when it exited 0 or came whole
  // A pipe: command's failure, " (the command exited with status N)", when it ends within 2 s of its output being
  // closed; "" otherwise.
  std::string command_status_soon();
  // " (why)" when an HTTP transfer has failed (a bad answer, a cut connection), else "". Does not wait.
  std::string source_failure() const;

  std::string shard_;
  int fd_ = -1;
  int pid_ = 0;
  std::unique_ptr<UrlBody> body_;  // an HTTP shard's transfer, which owns fd_
  struct archive* archive_ = nullptr;
  int64_t position_ = 0;
};

}  // namespace ddp
