// Shard sources: the bytes of a tar shard, and of a file beside it, wherever the shard lies: a local file, or an
// http:// or https:// URL read with libcurl Range requests (one kept-alive connection per thread), transient failures
// retried; and a URL's whole body as a stream (a compressed shard read front to back).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// The bytes [offset, offset + the sum of `sizes`) of the shard, read and checked as read_shard_bytes reads them (one
// preadv, or one Range request), into one string per piece: piece k the sizes[k] bytes after the pieces before it
// (a run of samples, each sample's bytes in a buffer of its own, none copied out of a larger one).
std::vector<std::string> read_shard_pieces(const std::string& shard, int64_t offset, const std::vector<int64_t>& sizes,
                                           int64_t shard_bytes, const ShardFetch& fetch);

// The whole file at the URL `url` (an index beside an HTTP shard), retried as read_shard_bytes; StorageError naming
// it when it cannot be had.
std::string read_url(const std::string& url, const ShardFetch& fetch);

// The body of one GET of a URL as a stream, for a shard read front to back (a compressed one): read from fd() (a
// socket that a thread of its own fills as the body arrives, so a slow reader holds the transfer back) to its end,
// then ended() says how the transfer ended. No retries: the reader starts the shard again.
class UrlBody {
 public:
  // Starts the transfer and waits for its answer: the first bytes of a 2xx body, or the end of the transfer.
  explicit UrlBody(const std::string& url);
  // A transfer still running is stopped (within about a second) and its thread joined.
  ~UrlBody();
  UrlBody(const UrlBody&) = delete;
  UrlBody& operator=(const UrlBody&) = delete;

  int fd() const { return fd_; }
  // Why the transfer failed ("HTTP 404 Not Found", libcurl's message for a refused, cut or stalled connection), once
  // it has ended; "" while it runs or when the whole body of a 2xx answer came. Does not wait.
  std::string failure() const;
  // Reads what is left of fd() (discarded), waits for the transfer's end and says why it failed, "" if it did not.
  std::string ended();

  struct Transfer;  // what the thread and the reader share

 private:
  int fd_ = -1;  // the reading end
  std::shared_ptr<Transfer> transfer_;
  std::thread thread_;
};

}  // namespace ddp
