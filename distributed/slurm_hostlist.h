// Slurm's hostlist expressions ("gpu[01-04,07],login1"): expanded to host names as `scontrol show hostnames` does.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddp {

// More hosts than this in one expression is refused (no job has them; a typo like [1-999999999] would not fit).
constexpr size_t kMaxHostlistHosts = 1 << 16;

// The hosts of `expression` in Slurm's order: comma-separated items outside brackets; in an item each bracket group
// ("[01-04,07]": numbers and ranges, a range keeping its lower bound's zero padding) multiplies the names, the first
// group varying slowest ("n[1-2]-ib[3,5]": n1-ib3 n1-ib5 n2-ib3 n2-ib5). Throws std::runtime_error naming the
// expression for an unbalanced or nested bracket, text after an item's last bracket group ("n[1-2]x", which Slurm
// refuses too), an empty item or group, a range that runs backwards or is not a
// number, or more than kMaxHostlistHosts hosts.
std::vector<std::string> expand_hostlist(const std::string& expression);

}  // namespace ddp
