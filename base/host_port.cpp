// "HOST:PORT" splitting.
#include "base/host_port.h"

#include <cctype>

namespace ddp {

std::optional<std::pair<std::string, int>> split_host_port(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size() || text.size() - colon - 1 > 5) return std::nullopt;
  int port = 0;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    port = port * 10 + (text[i] - '0');
  }
  if (port > 65535) return std::nullopt;
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos || host.find('[') != std::string::npos)
    return std::nullopt;
  if (host.empty()) return std::nullopt;
  return std::make_pair(host, port);
}

}  // namespace ddp
