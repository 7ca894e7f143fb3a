// HTTP(S) GET of one URL into an open file, through libcurl (redirects, proxies from the environment, TLS).
#pragma once

#include "data/download/md5.h"

#include <string>

namespace ddp {

// Streams the body of a 2xx response to file descriptor fd, feeding every byte to md5 too.
// Returns "" on success, otherwise why it failed in a few words ("HTTP 404 File not found",
// "Failed to connect to 127.0.0.1 port 9 ...: Couldn't connect to server"). Loopback never goes via a proxy.
// A build without libcurl (DDP_WITH_DOWNLOAD not defined) returns
// "this ddptrain was built without download support (libcurl)" for every URL.
std::string http_fetch(const std::string& url, int fd, Md5& md5);

// libcurl's global initialisation, done once for the process: "" when it succeeded (or when built without libcurl),
// else why not.
std::string curl_start_error();

// Sets libcurl's options for a GET of `url` as ddptrain makes every one: http and https only (redirects too, at most
// 5), no signals, 30 s to connect, a transfer under 1 KiB/s for `stall_s` seconds stopped, loopback never through a
// proxy, libcurl's message for a failure into `error_text` (CURL_ERROR_SIZE bytes). `curl` is a CURL* (libcurl's
// easy handle, a void*). Does nothing in a build without libcurl.
void set_get_options(void* curl, const std::string& url, long stall_s, char* error_text);

}  // namespace ddp
