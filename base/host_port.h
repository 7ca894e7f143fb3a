// "HOST:PORT" addresses ("[::1]:9100" for IPv6): split into host and port.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace ddp {

// HOST and PORT of "HOST:PORT" (HOST non-empty, in brackets when it holds colons; PORT 0-65535, 0 = any free one);
// none for anything else.
std::optional<std::pair<std::string, int>> split_host_port(const std::string& text);

}  // namespace ddp
