// How to give a distributed job MASTER_ADDR/MASTER_PORT under the launcher that started it (rendezvous' error hint).
#pragma once

#include <map>
#include <string>

namespace ddp {

// The launcher that set this process's rank variables, named for users: "Slurm (srun)", "Open MPI (mpirun)",
// "torchrun/ddprun", or "RANK/WORLD_SIZE set by hand". `source` is RendezvousInfo::source.
std::string launcher_name(const std::string& source, const std::map<std::string, std::string>& env);

// What to run so that every rank gets MASTER_ADDR and MASTER_PORT under that launcher (one line).
std::string master_address_hint(const std::string& source, const std::map<std::string, std::string>& env);

}  // namespace ddp
