// Shard sources: pread of a local shard; Range requests to an HTTP server through libcurl, one easy handle per thread
// (its connection kept alive between the samples), with retries that wait 1, 2, 4, ... s; a whole body streamed through
// a socket pair. Built without libcurl (CMake DDP_WITH_DOWNLOAD=OFF), a URL fails saying so.
#include "data/shard_source.h"

#include "base/thread_name.h"
#include "data/download/http_fetch.h"
#include "data/shard_patterns.h"
#include "data/storage_error.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>

#ifdef DDP_WITH_DOWNLOAD
#include <curl/curl.h>

#include <strings.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#endif

namespace ddp {
namespace {

std::string bytes_text(int64_t offset, int64_t length) {
  return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + length);
}

// Strings of the given sizes, each its own buffer.
std::vector<std::string> sized_pieces(const std::vector<int64_t>& sizes) {
  std::vector<std::string> pieces;
  pieces.reserve(sizes.size());
  for (const int64_t size : sizes) pieces.emplace_back(static_cast<size_t>(size), '\0');
  return pieces;
}

// Where the next byte of a stream goes when it fills `pieces` one after another (empty pieces passed over).
struct PieceCursor {
  explicit PieceCursor(std::vector<std::string>* p) : pieces(p) { settle(); }

  std::vector<std::string>* pieces;
  size_t piece = 0, within = 0;

  bool full() const { return piece == pieces->size(); }
  // Room left in the piece being filled (never 0 unless full), and that piece's next byte.
  size_t room() const { return (*pieces)[piece].size() - within; }
  char* next() const { return (*pieces)[piece].data() + within; }
  // `n` bytes more filled (at most what is left in the pieces).
  void filled(size_t n) {
    while (n > 0) {
      const size_t step = std::min(n, room());
      within += step;
      n -= step;
      settle();
    }
  }
  // `n` bytes copied in (at most what is left).
  void copy(const char* data, size_t n) {
    while (n > 0) {
      const size_t step = std::min(n, room());
      std::memcpy(next(), data, step);
      filled(step);
      data += step;
      n -= step;
    }
  }

 private:
  // On to the next piece with room, once this one is full.
  void settle() {
    while (!full() && within == (*pieces)[piece].size()) ++piece, within = 0;
  }
};

int64_t sum_of(const std::vector<int64_t>& sizes) { return std::accumulate(sizes.begin(), sizes.end(), int64_t{0}); }

// preadv straight into the pieces: no buffer of the whole run, no copy out of one.
std::vector<std::string> read_local(const std::string& path, int64_t offset, const std::vector<int64_t>& sizes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("shard " + path + ": " + std::strerror(errno));
  std::vector<std::string> pieces = sized_pieces(sizes);
  PieceCursor cursor(&pieces);
  std::vector<iovec> iov;
  for (off_t at = static_cast<off_t>(offset); !cursor.full();) {
    iov.clear();
    for (PieceCursor ahead = cursor; !ahead.full() && iov.size() < IOV_MAX; ahead.filled(ahead.room()))
      iov.push_back({ahead.next(), ahead.room()});
    const ssize_t n = ::preadv(fd, iov.data(), static_cast<int>(iov.size()), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "the file ends there";
      ::close(fd);
      throw std::runtime_error("shard " + path + ": cannot read " + bytes_text(offset, sum_of(sizes)) + " (" + why +
                               ")");
    }
    cursor.filled(static_cast<size_t>(n));
    at += n;
  }
  ::close(fd);
  return pieces;
}

// One attempt's failure: why ("" when it succeeded) and whether another attempt may succeed.
struct Failure {
  std::string why;
  bool transient = false;
};

// " (after N retries, data.shard_retries)" after `tries` retries; "" after none.
std::string retries_said(int64_t tries) {
  if (tries == 0) return "";
  return " (after " + std::to_string(tries) + (tries == 1 ? " retry" : " retries") + ", data.shard_retries)";
}

void wait_before_retry(const ShardFetch& fetch, int64_t tries) {
  double wait = fetch.first_wait_s;
  for (int64_t i = 0; i < tries && wait < fetch.max_wait_s; ++i) wait *= 2;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, fetch.max_wait_s)));
}

// `attempt` until it succeeds, retried while its failure is transient and retries are left; then StorageError
// "WHAT: why (after N retries, data.shard_retries)".
template <class F>
void with_retries(const std::string& what, const ShardFetch& fetch, const F& attempt) {
  for (int64_t tries = 0;; ++tries) {
    const Failure failure = attempt();
    if (failure.why.empty()) return;
    if (!failure.transient || tries >= fetch.retries)
      throw StorageError(what + ": " + failure.why + retries_said(tries));
    wait_before_retry(fetch, tries);
  }
}

#ifdef DDP_WITH_DOWNLOAD

// What one HTTP answer said: its final status line, Content-Range, and up to `limit` bytes of a 2xx body, appended to
// `body`, or (a Range request's) filling the pieces `into` points to.
struct Answer {
  std::string status_line;
  std::string content_range;
  std::string body;
  std::optional<PieceCursor> into;
  size_t received = 0;  // the 2xx body's bytes
  size_t limit = 0;
  bool over = false;  // a 2xx body longer than `limit`: the transfer was stopped
};

int answer_code(const std::string& status_line) {
  const size_t space = status_line.find(' ');
  return space == std::string::npos ? 0 : std::atoi(status_line.c_str() + space + 1);
}

// "HTTP 404 Not Found": an answer's status as errors say it.
std::string status_text(const std::string& status_line) {
  const size_t space = status_line.find(' ');
  return "HTTP " +
         (space == std::string::npos ? std::to_string(answer_code(status_line)) : status_line.substr(space + 1));
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

size_t on_answer_header(char* data, size_t size, size_t count, void* user) {
  auto* a = static_cast<Answer*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a redirect or a 100 Continue): forget the last one's
    a->status_line = trimmed(line);
    a->content_range.clear();
  } else if (line.size() > 14 && strncasecmp(line.c_str(), "content-range:", 14) == 0) {
    a->content_range = trimmed(line.substr(14));
  }
  return size * count;
}

size_t on_answer_body(char* data, size_t size, size_t count, void* user) {
  auto* a = static_cast<Answer*>(user);
  const size_t n = size * count;
  const int code = answer_code(a->status_line);
  if (code < 200 || code >= 300) return n;  // an error page: dropped, reported from the status
  if (a->received + n > a->limit) {
    a->over = true;
    return 0;  // CURLE_WRITE_ERROR: a server that ignores Range sends the whole shard
  }
  if (a->into)
    a->into->copy(data, n);
  else
    a->body.append(data, n);
  a->received += n;
  return n;
}

// This thread's easy handle: its connection to a server is kept for the next request.
CURL* thread_handle() {
  thread_local std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
  return handle.get();
}

// One GET of `url` (of `range` when not empty) into `answer`.
Failure get(const std::string& url, const std::string& range, Answer& answer) {
  if (std::string why = curl_start_error(); !why.empty()) return {why, false};
  CURL* h = thread_handle();
  if (!h) return {"libcurl could not create a transfer", false};
  curl_easy_reset(h);
  char error_text[CURL_ERROR_SIZE] = "";
  set_get_options(h, url, /*stall_s=*/30, error_text);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_answer_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &answer);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_answer_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
  if (!range.empty()) curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
  const CURLcode result = curl_easy_perform(h);
  if (answer.over)
    return {
        "the server sent more than the bytes asked for: it does not honour Range requests (nginx, Apache and "
        "object stores do)",
        false};
  if (result != CURLE_OK) {
    const bool permanent = result == CURLE_UNSUPPORTED_PROTOCOL || result == CURLE_URL_MALFORMAT ||
                           result == CURLE_TOO_MANY_REDIRECTS || result == CURLE_OUT_OF_MEMORY;
    return {*error_text ? error_text : curl_easy_strerror(result), !permanent};
  }
  const int code = answer_code(answer.status_line);
  if (code < 200 || code >= 300) {
    return {status_text(answer.status_line), code == 408 || code == 429 || code >= 500};
  }
  return {};
}

// The total of a Content-Range "bytes FIRST-LAST/TOTAL" that starts at `offset`; -1 when it is not one.
int64_t range_total(const std::string& content_range, int64_t offset) {
  long long first = 0, last = 0, total = 0;
  char end = 0;
  if (std::sscanf(content_range.c_str(), "bytes %lld-%lld/%lld%c", &first, &last, &total, &end) != 3 || first != offset)
    return -1;
  return total;
}

#endif

}  // namespace

struct UrlBody::Transfer {
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;  // the first bytes of a 2xx body came, or the transfer ended
  bool done = false;      // the transfer ended; `why` says how
  std::string why;
  std::atomic<bool> stop{false};  // the reader is gone
  std::string status_line;
  int fd = -1;  // the writing end, the thread's

  void answer() {
    std::lock_guard<std::mutex> lock(mu);
    answered = true;
    cv.notify_all();
  }
  // The end of the transfer: `failure` kept, then the writing end closed (the reader's end of file comes after it).
  void end(std::string failure) {
    {
      std::lock_guard<std::mutex> lock(mu);
      why = std::move(failure);
      done = answered = true;
      cv.notify_all();
    }
    if (fd >= 0) ::close(fd);
  }
};

namespace {

#ifdef DDP_WITH_DOWNLOAD

size_t on_stream_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<UrlBody::Transfer*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) t->status_line = trimmed(line);  // the last answer's, after redirects
  return size * count;
}

// A 2xx body's bytes into the socket (waiting while the reader is behind); an error page's dropped.
size_t on_stream_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<UrlBody::Transfer*>(user);
  const size_t n = size * count;
  const int code = answer_code(t->status_line);
  if (code < 200 || code >= 300) return n;
  t->answer();
  for (size_t done = 0; done < n;) {
    const ssize_t sent = ::send(t->fd, data + done, n - done, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return 0;  // the reader is gone: CURLE_WRITE_ERROR ends the transfer
    done += static_cast<size_t>(sent);
  }
  return n;
}

int on_stream_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<UrlBody::Transfer*>(user)->stop ? 1 : 0;  // non-zero: CURLE_ABORTED_BY_CALLBACK
}

// One GET of `url`, its body into t->fd; why it failed, "" when the whole body of a 2xx answer was sent.
std::string stream_body(UrlBody::Transfer* t, const std::string& url) {
  if (std::string why = curl_start_error(); !why.empty()) return why;
  std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
  if (!handle) return "libcurl could not create a transfer";
  CURL* h = handle.get();
  char error_text[CURL_ERROR_SIZE] = "";
  set_get_options(h, url, /*stall_s=*/30, error_text);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_stream_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_stream_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, t);
  const CURLcode result = curl_easy_perform(h);
  const int code = answer_code(t->status_line);
  if (code != 0 && (code < 200 || code >= 300)) return status_text(t->status_line);
  if (result != CURLE_OK) return *error_text ? error_text : curl_easy_strerror(result);
  return "";
}

#else

std::string stream_body(UrlBody::Transfer*, const std::string&) { return "this ddptrain was built without libcurl"; }

#endif

}  // namespace

UrlBody::UrlBody(const std::string& url) : transfer_(std::make_shared<Transfer>()) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    transfer_->end(std::string("cannot make a socket pair: ") + std::strerror(errno));
    return;
  }
  fd_ = ends[0];
  transfer_->fd = ends[1];
  thread_ = std::thread([t = transfer_, url] {
    name_this_thread("ddp-url-body");
    t->end(stream_body(t.get(), url));
  });
  std::unique_lock<std::mutex> lock(transfer_->mu);
  transfer_->cv.wait(lock, [this] { return transfer_->answered; });
}

UrlBody::~UrlBody() {
  transfer_->stop = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // a send waiting for the reader fails at once
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

std::string UrlBody::failure() const {
  std::lock_guard<std::mutex> lock(transfer_->mu);
  return transfer_->done ? transfer_->why : "";
}

std::string UrlBody::ended() {
  char sink[1 << 14];
  for (ssize_t got = 1; fd_ >= 0 && got != 0;)
    if ((got = ::read(fd_, sink, sizeof sink)) < 0 && errno != EINTR) break;
  if (thread_.joinable()) thread_.join();
  return failure();
}

void retry_storage(const ShardFetch& fetch, const std::function<void()>& attempt) {
  for (int64_t tries = 0;; ++tries) {
    try {
      attempt();
      return;
    } catch (const StorageError& e) {
      if (tries >= fetch.retries) throw StorageError(e.what() + retries_said(tries));
    }
    wait_before_retry(fetch, tries);
  }
}

#ifdef DDP_WITH_DOWNLOAD

std::vector<std::string> read_shard_pieces(const std::string& shard, int64_t offset, const std::vector<int64_t>& sizes,
                                           int64_t shard_bytes, const ShardFetch& fetch) {
  if (!http_shard(shard)) return read_local(shard, offset, sizes);
  const int64_t length = sum_of(sizes);
  const std::string range = std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  std::vector<std::string> pieces = sized_pieces(sizes);
  with_retries("shard " + shard + ": " + bytes_text(offset, length), fetch, [&]() -> Failure {
    Answer answer;
    answer.limit = static_cast<size_t>(length);
    answer.into = PieceCursor(&pieces);  // each try fills them from the start
    if (Failure f = get(shard, range, answer); !f.why.empty()) return f;
    if (answer_code(answer.status_line) != 206)
      return {"the server answered \"" + answer.status_line +
                  "\" to a Range request, not 206 Partial Content: it does not honour Range requests",
              false};
    const int64_t total = range_total(answer.content_range, offset);
    if (total < 0)
      return {"the server's Content-Range \"" + answer.content_range + "\" is not the range asked for", false};
    if (shard_bytes >= 0 && total != shard_bytes)
      return {"the shard is " + std::to_string(total) + " bytes, its index was made for " +
                  std::to_string(shard_bytes) + " (index it again with ddptrain --index-shards)",
              false};
    if (answer.received != static_cast<size_t>(length))
      return {"the server sent " + std::to_string(answer.received) + " of the " + std::to_string(length) +
                  " bytes asked for",
              true};
    return {};
  });
  return pieces;
}

std::string read_url(const std::string& url, const ShardFetch& fetch) {
  std::string bytes;
  with_retries(url, fetch, [&]() -> Failure {
    Answer answer;
    answer.limit = size_t{1} << 31;  // an index of millions of samples is tens of MB
    if (Failure f = get(url, "", answer); !f.why.empty()) return f;
    bytes = std::move(answer.body);
    return {};
  });
  return bytes;
}

#else

std::vector<std::string> read_shard_pieces(const std::string& shard, int64_t offset, const std::vector<int64_t>& sizes,
                                           int64_t, const ShardFetch& fetch) {
  if (!http_shard(shard)) return read_local(shard, offset, sizes);
  with_retries("shard " + shard, fetch, [] { return Failure{"this ddptrain was built without libcurl", false}; });
  return {};
}

std::string read_url(const std::string& url, const ShardFetch& fetch) {
  with_retries(url, fetch, [] { return Failure{"this ddptrain was built without libcurl", false}; });
  return "";
}

#endif

std::string read_shard_bytes(const std::string& shard, int64_t offset, int64_t length, int64_t shard_bytes,
                             const ShardFetch& fetch) {
  return std::move(read_shard_pieces(shard, offset, {length}, shard_bytes, fetch).front());
}

}  // namespace ddp
