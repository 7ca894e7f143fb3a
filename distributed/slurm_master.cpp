// slurm_first_host (the node list's first host) and slurm_job_port (Lightning's port from the job id).
#include "distributed/slurm_master.h"

#include "distributed/slurm_hostlist.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ddp {

SlurmFirstHost slurm_first_host(const std::map<std::string, std::string>& env) {
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    const auto it = env.find(name);
    if (it == env.end() || it->second.empty()) continue;
    try {
      return {name, expand_hostlist(it->second).front()};
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("environment variable ") + name + ": " + e.what());
    }
  }
  return {};
}

int slurm_job_port(const std::map<std::string, std::string>& env) {
  const auto it = env.find("SLURM_JOB_ID");
  if (it == env.end() || it->second.empty()) return 12910;
  const std::string& id = it->second;
  if (!std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw std::runtime_error("environment variable SLURM_JOB_ID=\"" + id +
                             "\" is not a job id (digits; the store's port is its last 4 + 15000)");
  return 15000 + std::stoi(id.size() > 4 ? id.substr(id.size() - 4) : id);
}

}  // namespace ddp
