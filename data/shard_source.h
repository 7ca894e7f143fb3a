// Shard sources: the bytes of a tar shard, and of a file beside it, wherever the shard lies: a local file, or an
// http:// or https:// URL read with libcurl Range requests (one kept-alive connection per thread), transient failures
// retried.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ddp {

struct ShardFetch {
  int64_t retries = 3;        // data.shard_retries: attempts after the first when an HTTP read fails transiently
  double first_wait_s = 1.0;  // the wait before the first retry, doubled before each next one
  double max_wait_s = 30.0;   // the longest wait between two attempts
};

// Runs `attempt` until it returns without throwing StorageError, trying again `fetch.retries` times with the waits
// above; then the last StorageError with "(after N retries, data.shard_retries)" added.
void retry_storage(const ShardFetch& fetch, const std::function<void()>& attempt);

// The bytes [offset, offset + length) of the shard `shard`. A local file is read with pread (std::runtime_error
// naming it when it holds fewer bytes). A URL is read with one Range request; `shard_bytes` (-1: unknown) is the size
// its index was made for, checked against the server's Content-Range. A transient failure (no connection, a cut or
// stalled transfer, HTTP 408, 429 or 5xx) is retried `fetch.retries` times; then, as for any other HTTP error (404,
// a server that ignores Range), StorageError: one line naming the shard, the bytes and the server's answer.
std::string read_shard_bytes(const std::string& shard, int64_t offset, int64_t length, int64_t shard_bytes,
                             const ShardFetch& fetch);

// The whole file at the URL `url` (an index beside an HTTP shard), retried as read_shard_bytes; StorageError naming
// it when it cannot be had.
std::string read_url(const std::string& url, const ShardFetch& fetch);

}  // namespace ddp
