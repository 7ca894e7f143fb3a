// name_this_thread: the calling thread's name as ps, top, gdb and ddptrain's hang report show it.
#include "base/thread_name.h"

#include <pthread.h>

namespace ddp {

void name_this_thread(const std::string& name) { pthread_setname_np(pthread_self(), name.substr(0, 15).c_str()); }

}  // namespace ddp
