// The namespaces a process lives in, which decide whether ddptest_python's fork server can serve it.
#pragma once

#include <unistd.h>

#include <string>

namespace ddp::test {

// This process's network, mount, PID, IPC, UTS and user namespaces, as the kernel names them ("net:[4026531833];..."),
// or "" where /proc does not say. A fork server runs its children in its own namespaces, so it serves only clients
// that share all of them.
inline std::string namespaces() {
  std::string ids;
  for (const char* ns : {"net", "mnt", "pid", "ipc", "uts", "user"}) {
    char link[128] = {0};
    const std::string path = std::string("/proc/self/ns/") + ns;
    if (readlink(path.c_str(), link, sizeof link - 1) < 0) return "";
    ids += std::string(link) + ";";
  }
  return ids;
}

}  // namespace ddp::test
