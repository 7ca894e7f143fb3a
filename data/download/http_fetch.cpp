// HTTP(S) GET into a file with libcurl: status-line capture, body streaming with MD5, timeouts, no proxy for loopback.
// Built without libcurl (CMake DDP_WITH_DOWNLOAD=OFF, or AUTO without it), every fetch fails saying so.
#include "data/download/http_fetch.h"

#ifdef DDP_WITH_DOWNLOAD
#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#endif

namespace ddp {
#ifdef DDP_WITH_DOWNLOAD
namespace {

struct Transfer {
  int fd = -1;
  Md5* md5 = nullptr;
  std::string status_line;  // last "HTTP/x NNN reason" seen (the final one after redirects)
  int write_errno = 0;
};

int status_code(const std::string& status_line) {
  size_t space = status_line.find(' ');
  return space == std::string::npos ? 0 : std::atoi(status_line.c_str() + space + 1);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    t->status_line = line;
  }
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  int code = status_code(t->status_line);
  if (code < 200 || code >= 300) return n;  // an error page: read and dropped, reported from the status
  t->md5->update(data, n);
  for (size_t done = 0; done < n;) {
    ssize_t w = ::write(t->fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      t->write_errno = w < 0 ? errno : EIO;
      return 0;  // makes curl stop with CURLE_WRITE_ERROR
    }
    done += static_cast<size_t>(w);
  }
  return n;
}

// The user's no_proxy list (no_proxy, else NO_PROXY) with loopback added: a local server is never reached through
// a proxy.
std::string no_proxy_hosts() {
  const char* env = std::getenv("no_proxy");
  if (!env || !*env) env = std::getenv("NO_PROXY");
  std::string hosts = env && *env ? std::string(env) + "," : "";
  return hosts + "localhost,127.0.0.1,::1";
}

}  // namespace

std::string curl_start_error() {
  static std::once_flag init_once;
  static CURLcode init_result = CURLE_OK;
  std::call_once(init_once, [] { init_result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return init_result == CURLE_OK ? ""
                                 : std::string("libcurl initialisation failed: ") + curl_easy_strerror(init_result);
}

void set_get_options(void* curl, const std::string& url, long stall_s, char* error_text) {
  CURL* h = curl;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());  // libcurl copies string options
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall_s);
  curl_easy_setopt(h, CURLOPT_NOPROXY, no_proxy_hosts().c_str());
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ddptrain");
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_text);
}

std::string http_fetch(const std::string& url, int fd, Md5& md5) {
  if (std::string why = curl_start_error(); !why.empty()) return why;

  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return "libcurl could not create a transfer";
  Transfer t;
  t.fd = fd;
  t.md5 = &md5;
  char error_text[CURL_ERROR_SIZE] = "";
  CURL* h = curl.get();
  set_get_options(h, url, /*stall_s=*/60, error_text);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);

  CURLcode result = curl_easy_perform(h);
  if (t.write_errno != 0) return std::string("writing the temporary file failed: ") + std::strerror(t.write_errno);
  if (result != CURLE_OK) return *error_text ? error_text : curl_easy_strerror(result);
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code < 200 || code >= 300) {
    std::string reason = t.status_line.substr(std::min(t.status_line.size(), t.status_line.find(' ') + 1));
    return "HTTP " + (reason.empty() ? std::to_string(code) : reason);
  }
  return "";
}

#else

std::string http_fetch(const std::string&, int, Md5&) {
  return "this ddptrain was built without download support (libcurl)";
}

std::string curl_start_error() { return ""; }

void set_get_options(void*, const std::string&, long, char*) {}

#endif
}  // namespace ddp
