// Shard sources: pread of a local shard; Range requests to an HTTP server through libcurl, one easy handle per thread
// (its connection kept alive between the samples), with retries that wait 1, 2, 4, ... s. Built without libcurl
// (CMake DDP_WITH_DOWNLOAD=OFF), a URL fails saying so.
#include "data/shard_source.h"

#include "data/download/http_fetch.h"
#include "data/shard_patterns.h"
#include "data/storage_error.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
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

std::string read_local(const std::string& path, int64_t offset, int64_t length) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("shard " + path + ": " + std::strerror(errno));
  std::string bytes(static_cast<size_t>(length), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset) + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "the file ends there";
      ::close(fd);
      throw std::runtime_error("shard " + path + ": cannot read " + bytes_text(offset, length) + " (" + why + ")");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
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

// What one HTTP answer said: its final status line, Content-Range, and up to `limit` bytes of a 2xx body.
struct Answer {
  std::string status_line;
  std::string content_range;
  std::string body;
  size_t limit = 0;
  bool over = false;  // a 2xx body longer than `limit`: the transfer was stopped
};

int answer_code(const std::string& status_line) {
  const size_t space = status_line.find(' ');
  return space == std::string::npos ? 0 : std::atoi(status_line.c_str() + space + 1);
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
  if (a->body.size() + n > a->limit) {
    a->over = true;
    return 0;  // CURLE_WRITE_ERROR: a server that ignores Range sends the whole shard
  }
  a->body.append(data, n);
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
    const size_t space = answer.status_line.find(' ');
    return {"HTTP " + (space == std::string::npos ? std::to_string(code) : answer.status_line.substr(space + 1)),
            code == 408 || code == 429 || code >= 500};
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

std::string read_shard_bytes(const std::string& shard, int64_t offset, int64_t length, int64_t shard_bytes,
                             const ShardFetch& fetch) {
  if (!http_shard(shard)) return read_local(shard, offset, length);
  const std::string range = std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  std::string bytes;
  with_retries("shard " + shard + ": " + bytes_text(offset, length), fetch, [&]() -> Failure {
    Answer answer;
    answer.limit = static_cast<size_t>(length);
    answer.body.reserve(answer.limit);  // the bytes asked for, in one allocation
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
    if (answer.body.size() != static_cast<size_t>(length))
      return {"the server sent " + std::to_string(answer.body.size()) + " of the " + std::to_string(length) +
                  " bytes asked for",
              true};
    bytes = std::move(answer.body);
    return {};
  });
  return bytes;
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

std::string read_shard_bytes(const std::string& shard, int64_t offset, int64_t length, int64_t,
                             const ShardFetch& fetch) {
  if (!http_shard(shard)) return read_local(shard, offset, length);
  with_retries("shard " + shard, fetch, [] { return Failure{"this ddptrain was built without libcurl", false}; });
  return "";
}

std::string read_url(const std::string& url, const ShardFetch& fetch) {
  with_retries(url, fetch, [] { return Failure{"this ddptrain was built without libcurl", false}; });
  return "";
}

#endif

}  // namespace ddp
