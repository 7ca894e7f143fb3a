// proc_stat: a local process's start time and state from /proc/PID/stat, to tell a live peer from a gone one.
#include "distributed/proc_stat.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ddp {

uint64_t process_start_time(int64_t pid, char* state) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // The command name (field 2) is in parentheses and may hold spaces: fields 3.. follow the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t start = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && state) *state = field.empty() ? '?' : field[0];
    if (i == 22) start = std::strtoull(field.c_str(), nullptr, 10);
  }
  return start;
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  char state = '?';
  return process_start_time(pid, &state) != 0 && state != 'Z' && state != 'X';
}

}  // namespace ddp
