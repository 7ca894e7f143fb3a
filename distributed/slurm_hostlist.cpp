// Slurm hostlist expansion (src/common/hostlist.c's syntax).
#include "distributed/slurm_hostlist.h"

#include <cctype>
#include <stdexcept>

namespace ddp {
namespace {

[[noreturn]] void bad(const std::string& expression, const std::string& why) {
  throw std::runtime_error("hostlist \"" + expression + "\": " + why);
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "01-04,07" -> 01 02 03 04 07.
std::vector<std::string> expand_group(const std::string& group, const std::string& expression) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= group.size()) {
    size_t comma = group.find(',', start);
    if (comma == std::string::npos) comma = group.size();
    const std::string part = group.substr(start, comma - start);
    const size_t dash = part.find('-');
    const std::string lo = part.substr(0, dash), hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 18 || hi.size() > 18)
      bad(expression, "\"[" + group + "]\" holds \"" + part + "\", not a number or a range of numbers");
    const unsigned long long first = std::stoull(lo), last = std::stoull(hi);
    if (last < first) bad(expression, "the range " + part + " runs backwards");
    if (last - first >= kMaxHostlistHosts) bad(expression, "more than " + std::to_string(kMaxHostlistHosts) + " hosts");
    for (unsigned long long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out.push_back(digits);
    }
    start = comma + 1;
  }
  return out;
}

// One item ("n[1-2]-ib[3,5]") into `hosts`.
void expand_item(const std::string& item, const std::string& expression, std::vector<std::string>& hosts) {
  std::vector<std::string> names{""};
  size_t at = 0;
  while (at < item.size()) {
    const size_t open = item.find('[', at);
    const std::string text = item.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (text.find(']') != std::string::npos) bad(expression, "a ']' without its '['");
    if (open == std::string::npos && at > 0)  // Slurm takes text between bracket groups, not after the last
      bad(expression, "\"" + text + "\" follows the last bracket group of \"" + item + "\"");
    for (std::string& name : names) name += text;
    if (open == std::string::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string::npos) bad(expression, "a '[' without its ']'");
    const std::string group = item.substr(open + 1, close - open - 1);
    if (group.find('[') != std::string::npos) bad(expression, "nested brackets");
    const std::vector<std::string> numbers = expand_group(group, expression);
    if (names.size() * numbers.size() > kMaxHostlistHosts)
      bad(expression, "more than " + std::to_string(kMaxHostlistHosts) + " hosts");
    std::vector<std::string> next;
    next.reserve(names.size() * numbers.size());
    for (const std::string& name : names)
      for (const std::string& n : numbers) next.push_back(name + n);
    names = std::move(next);
    at = close + 1;
  }
  if (hosts.size() + names.size() > kMaxHostlistHosts)
    bad(expression, "more than " + std::to_string(kMaxHostlistHosts) + " hosts");
  hosts.insert(hosts.end(), names.begin(), names.end());
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression) {
  std::vector<std::string> hosts;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= expression.size(); ++i) {
    const char c = i < expression.size() ? expression[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) bad(expression, "a ']' without its '['");
    if (c != ',' || depth > 0) continue;
    const std::string item = expression.substr(start, i - start);
    if (item.empty()) bad(expression, "an empty host name");
    expand_item(item, expression, hosts);
    start = i + 1;
  }
  if (depth > 0) bad(expression, "a '[' without its ']'");
  return hosts;
}

}  // namespace ddp
