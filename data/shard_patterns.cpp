// Shard patterns expanded as webdataset's expand_urls and braceexpand 0.1.7 expand them.
#include "data/shard_patterns.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>

namespace ddp {
namespace {

using Strings = std::vector<std::string>;

const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// The most shards a list of patterns may name: a pattern expands eagerly, and a mistyped range must fail, not fill
// the memory.
constexpr size_t kMaxShards = size_t{1} << 20;

[[noreturn]] void too_many(const std::string& whole) {
  throw std::invalid_argument("the shard pattern \"" + whole + "\" names more than " + std::to_string(kMaxShards) +
                              " shards");
}

// Every string of the product of `items` (each a list of alternatives), left to right.
Strings product(const std::vector<Strings>& items, const std::string& whole) {
  Strings out{""};
  for (const Strings& alternatives : items) {
    if (!alternatives.empty() && out.size() > kMaxShards / alternatives.size()) too_many(whole);
    Strings next;
    next.reserve(out.size() * alternatives.size());
    for (const std::string& head : out)
      for (const std::string& tail : alternatives) next.push_back(head + tail);
    out = std::move(next);
  }
  return out;
}

Strings parse_pattern(const std::string& pattern, const std::string& whole);

// A range's end or step as a number; invalid_argument naming the pattern past what 64 bits hold.
long long range_number(const std::string& text, const std::string& whole) {
  try {
    return std::stoll(text);
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("the shard pattern \"" + whole + "\" has a range bound out of range: " + text);
  }
}

// braceexpand's range step: its magnitude, 1 when absent or 0.
long long range_step(const std::string& step_text, const std::string& whole) {
  const long long step = step_text.empty() ? 0 : range_number(step_text, whole);
  return step == 0 ? 1 : step;
}

// The values first, first +- step, ... up to last in either direction (braceexpand's ranges include both ends), as
// make(value); too_many past kMaxShards.
template <class Make>
Strings range(long long first, long long last, long long step, const std::string& whole, const Make& make) {
  const unsigned long long span =
      first < last ? static_cast<unsigned long long>(last) - first : static_cast<unsigned long long>(first) - last;
  if (span / static_cast<unsigned long long>(step) >= kMaxShards) too_many(whole);
  const unsigned long long count = span / static_cast<unsigned long long>(step) + 1;
  Strings out;
  for (unsigned long long k = 0; k < count; ++k) {
    const auto moved = static_cast<long long>(k * static_cast<unsigned long long>(step));
    out.push_back(make(first < last ? first + moved : first - moved));
  }
  return out;
}

// braceexpand's make_int_range: padded to the wider end when an end other than "0" or "-0" starts with 0 or -0.
Strings int_range(const std::string& first, const std::string& last, const std::string& step_text,
                  const std::string& whole) {
  const auto padded = [](const std::string& s) {
    return s != "0" && s != "-0" && (s.rfind("0", 0) == 0 || s.rfind("-0", 0) == 0);
  };
  const int width = padded(first) || padded(last) ? static_cast<int>(std::max(first.size(), last.size())) : 0;
  return range(range_number(first, whole), range_number(last, whole), range_step(step_text, whole), whole,
               [width](long long i) {
                 char buf[48];
                 return std::string(buf, static_cast<size_t>(std::snprintf(buf, sizeof buf, "%0*lld", width, i)));
               });
}

// braceexpand's make_char_range over A..Za..z (a mixed-case range skips what lies between Z and a).
Strings char_range(char first, char last, const std::string& step_text, const std::string& whole) {
  return range(static_cast<long long>(kAlphabet.find(first)), static_cast<long long>(kAlphabet.find(last)),
               range_step(step_text, whole), whole,
               [](long long i) { return std::string(1, kAlphabet[static_cast<size_t>(i)]); });
}

// A comma sequence at depth 0 of `seq`, each part a pattern; false when `seq` holds no such comma.
bool parse_sequence(const std::string& seq, const std::string& whole, Strings& out) {
  std::vector<std::string> parts;
  size_t start = 0;
  int depth = 0;
  for (size_t pos = 0; pos < seq.size(); ++pos) {
    if (seq[pos] == '\\') {
      ++pos;
    } else if (seq[pos] == '{') {
      ++depth;
    } else if (seq[pos] == '}') {
      --depth;
    } else if (seq[pos] == ',' && depth == 0) {
      parts.push_back(seq.substr(start, pos - start));
      start = pos + 1;
    }
  }
  if (depth != 0 || parts.empty()) return false;
  parts.push_back(seq.substr(start));
  for (const std::string& part : parts) {
    const Strings expanded = parse_pattern(part, whole);
    if (expanded.size() > kMaxShards - out.size()) too_many(whole);
    out.insert(out.end(), expanded.begin(), expanded.end());
  }
  return true;
}

// What a brace expression `expr` (between a pair of braces) stands for; false when it is neither a range nor a
// sequence (the braces are then literal).
bool parse_expression(const std::string& expr, const std::string& whole, Strings& out) {
  static const std::regex int_range_re(R"(^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$)");
  static const std::regex char_range_re(R"(^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$)");
  std::smatch m;
  if (std::regex_match(expr, m, int_range_re)) {
    out = int_range(m[1], m[2], m[3], whole);
    return true;
  }
  if (std::regex_match(expr, m, char_range_re)) {
    out = char_range(m.str(1)[0], m.str(2)[0], m[3], whole);
    return true;
  }
  return parse_sequence(expr, whole, out);
}

Strings parse_pattern(const std::string& pattern, const std::string& whole) {
  std::vector<Strings> items;
  size_t start = 0, pos = 0;
  int depth = 0;
  for (; pos < pattern.size(); ++pos) {
    if (pattern[pos] == '\\') {
      ++pos;
      continue;
    }
    if (pattern[pos] == '{') {
      if (depth == 0 && pos > start) {
        items.push_back({pattern.substr(start, pos - start)});
        start = pos;
      }
      ++depth;
    } else if (pattern[pos] == '}') {
      --depth;
      if (depth == 0) {
        const std::string expr = pattern.substr(start + 1, pos - start - 1);
        Strings expanded;
        if (parse_expression(expr, whole, expanded)) {
          items.push_back(std::move(expanded));
        } else {
          items.push_back({"{"});
          items.push_back(parse_pattern(expr, whole));
          items.push_back({"}"});
        }
        start = pos + 1;
      }
    }
  }
  if (depth != 0) throw std::invalid_argument("unbalanced braces in the shard pattern \"" + whole + "\"");
  pos = std::min(pos, pattern.size());
  if (start < pos) items.push_back({pattern.substr(start, pos - start)});
  return product(items, whole);
}

// A backslash's next character, itself (braceexpand strips escapes after expanding).
std::string unescaped(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out += s[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_shard_patterns(const std::string& patterns) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = patterns.find("::", start);
    const std::string pattern = patterns.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const std::string& s : parse_pattern(pattern, pattern)) {
      if (out.size() == kMaxShards) too_many(patterns);
      out.push_back(unescaped(s));
    }
    if (end == std::string::npos) break;
    start = end + 2;
  }
  return out;
}

bool http_shard(const std::string& shard) { return shard.rfind("http://", 0) == 0 || shard.rfind("https://", 0) == 0; }

bool pipe_shard(const std::string& shard) { return shard.rfind("pipe:", 0) == 0; }

bool remote_shard(const std::string& shard) { return http_shard(shard) || pipe_shard(shard); }

}  // namespace ddp
