// ddprun: starts worker processes with torchrun's environment contract.
#pragma once

#include <string>
#include <vector>

namespace ddp {

int ddprun_main(const std::vector<std::string>& args);

}  // namespace ddp
