// Shard patterns: webdataset's way of naming a list of shards (brace expansion as Python's braceexpand does it,
// patterns joined by "::"), expanded into one source per shard.
#pragma once

#include <string>
#include <vector>

namespace ddp {

// The shards `patterns` names, in order: the patterns split at "::", each brace-expanded as webdataset's expand_urls
// does with braceexpand 0.1.7 (bash's brace expansion: "{a,b}" sequences, "{000..099}" integer ranges padded to the
// wider end when either end has a leading zero, "{a..e}" letter ranges, an optional "..step", either direction,
// nesting; a backslash takes the next character literally). Environment variables are not substituted. Throws
// std::invalid_argument naming the pattern for unbalanced braces, a range bound past 64 bits, or more than 2^20
// shards in all.
std::vector<std::string> expand_shard_patterns(const std::string& patterns);

// Whether `shard` is an http:// or https:// URL.
bool http_shard(const std::string& shard);
// Whether `shard` names a pipe: command ("pipe:COMMAND").
bool pipe_shard(const std::string& shard);
// Whether `shard` names a source other than a local file: an http:// or https:// URL, or a pipe: command.
bool remote_shard(const std::string& shard);

}  // namespace ddp
