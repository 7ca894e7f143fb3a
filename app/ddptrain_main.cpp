// ddptrain: the training binary's main.
#include "app/ddptrain.h"

int main(int argc, char** argv) { return ddp::ddptrain_main(std::vector<std::string>(argv + 1, argv + argc)); }
