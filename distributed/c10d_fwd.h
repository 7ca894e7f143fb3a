// Forward declarations of the c10d classes ddptrain's headers hold by pointer, so they need not include c10d.
#pragma once

namespace c10d {
class Backend;
class Logger;
class ProcessGroup;
class Reducer;
class Store;
class TCPStore;
}  // namespace c10d
