// name_this_thread: the calling thread's name as ps, top, gdb and ddptrain's hang report show it.
#pragma once

#include <string>

namespace ddp {

// Linux keeps 15 characters of it ("ddp-data-3"); a longer name is cut there.
void name_this_thread(const std::string& name);

}  // namespace ddp
