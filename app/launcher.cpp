// ddprun launcher (issue 6): not built yet; says so and exits 2.
#include "app/launcher.h"

#include <iostream>

namespace ddp {

int ddprun_main(const std::vector<std::string>& args) {
  std::cerr << "error: ddprun is not implemented yet; launch ranks by setting RANK, WORLD_SIZE, MASTER_ADDR and "
               "MASTER_PORT for each ddptrain process"
            << std::endl;
  return 2;
}

}  // namespace ddp
