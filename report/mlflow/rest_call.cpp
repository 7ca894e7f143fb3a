// rest_call: one HTTP request through libcurl's multi interface, polled so that an abandoned request ends at once.
#include "report/mlflow/rest_call.h"

#ifdef DDP_WITH_DOWNLOAD
#include <curl/curl.h>

#include <cstdio>
#include <memory>
#include <mutex>
#endif

namespace ddp {
#ifdef DDP_WITH_DOWNLOAD
namespace {

size_t append_to_reply(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

RestReply rest_call(const RestRequest& request, const std::atomic<bool>& abandon) {
  static std::once_flag init_once;
  static CURLcode init_result = CURLE_OK;
  std::call_once(init_once, [] { init_result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  RestReply reply;
  if (init_result != CURLE_OK) {
    reply.error = std::string("libcurl initialisation failed: ") + curl_easy_strerror(init_result);
    return reply;
  }
  std::unique_ptr<CURL, void (*)(CURL*)> easy(curl_easy_init(), curl_easy_cleanup);
  std::unique_ptr<CURLM, CURLMcode (*)(CURLM*)> multi(curl_multi_init(), curl_multi_cleanup);
  if (!easy || !multi) {
    reply.error = "libcurl could not create a transfer";
    return reply;
  }
  CURL* h = easy.get();
  char error_text[CURL_ERROR_SIZE] = "";
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(nullptr, curl_slist_free_all);
  std::unique_ptr<FILE, int (*)(FILE*)> upload(nullptr, std::fclose);
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout_s * 1000));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_s * 1000));
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ddptrain");
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_to_reply);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply.body);
  if (request.method == "POST") {
    headers.reset(curl_slist_append(nullptr, "Content-Type: application/json"));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method == "PUT") {
    upload.reset(std::fopen(request.upload_path.c_str(), "rb"));
    if (!upload) {
      reply.error = "cannot read " + request.upload_path;
      return reply;
    }
    std::fseek(upload.get(), 0, SEEK_END);
    const long size = std::ftell(upload.get());
    std::rewind(upload.get());
    headers.reset(curl_slist_append(nullptr, "Content-Type: application/octet-stream"));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);  // a PUT whose body libcurl reads from the file
    curl_easy_setopt(h, CURLOPT_READDATA, upload.get());
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  }
  curl_multi_add_handle(multi.get(), h);
  int running = 1;
  curl_off_t sent = 0, received = 0;
  while (running) {
    if (curl_multi_perform(multi.get(), &running) != CURLM_OK) break;
    if (request.moved) {
      curl_off_t up = 0, down = 0;
      curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
      curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
      if (up != sent || down != received) *request.moved = std::chrono::steady_clock::now().time_since_epoch().count();
      sent = up;
      received = down;
    }
    if (!running) break;
    if (abandon.load()) {
      curl_multi_remove_handle(multi.get(), h);
      reply.error = "no answer before the run's exit wait ran out";
      return reply;
    }
    curl_multi_poll(multi.get(), nullptr, 0, 50, nullptr);
  }
  CURLcode result = CURLE_FAILED_INIT;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left))
    if (msg->msg == CURLMSG_DONE) result = msg->data.result;
  curl_multi_remove_handle(multi.get(), h);
  if (result != CURLE_OK) {
    reply.error = *error_text ? error_text : curl_easy_strerror(result);
    return reply;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

#else

RestReply rest_call(const RestRequest&, const std::atomic<bool>&) {
  RestReply reply;
  reply.error = "this ddptrain was built without libcurl (CMake DDP_WITH_DOWNLOAD)";
  return reply;
}

#endif
}  // namespace ddp
