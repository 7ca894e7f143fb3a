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

}  // namespace ddp
