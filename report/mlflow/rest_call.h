// rest_call: one HTTP request through libcurl, bounded by connect and total timeouts and abandoned on request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace ddp {

struct RestRequest {
  std::string method = "GET";  // GET, POST or PUT
  std::string url;
  std::string body;         // sent with POST as application/json
  std::string upload_path;  // PUT: the file sent as the body (application/octet-stream)
  double connect_timeout_s = 3, timeout_s = 10;
  // Where the request stores steady_clock ticks whenever bytes move either way (nullptr: nowhere), so that a waiter
  // can tell a long transfer from a silent server.
  std::atomic<int64_t>* moved = nullptr;
};

struct RestReply {
  long status = 0;    // the HTTP status; 0 when no answer came
  std::string body;   // the answer's body
  std::string error;  // why no answer came (libcurl's words); "" when one came
};

// Performs `request` on the calling thread; returns within its timeouts, or within ~50 ms once `abandon` is true.
// Built without libcurl (CMake DDP_WITH_DOWNLOAD=OFF), every call answers an error saying so.
RestReply rest_call(const RestRequest& request, const std::atomic<bool>& abandon);

}  // namespace ddp
