// process_env: this process's environment as a name -> value map (rendezvous, ddprun and progress read it).
#pragma once

#include <map>
#include <string>

namespace ddp {

std::map<std::string, std::string> process_env();

}  // namespace ddp
