// ddprun: the launcher binary's main.
#include "launcher/ddprun.h"

int main(int argc, char** argv) { return ddp::ddprun_main(std::vector<std::string>(argv + 1, argv + argc)); }
