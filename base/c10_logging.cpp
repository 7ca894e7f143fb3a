// quiet_c10_logging: sets c10's log threshold (FLAGS_caffe2_log_level) to FATAL unless TORCH_CPP_LOG_LEVEL is set.
#include "base/c10_logging.h"

#include <c10/util/Logging.h>

#include <cstdlib>

namespace ddp {

void quiet_c10_logging() {
  const char* level = std::getenv("TORCH_CPP_LOG_LEVEL");
  if (!level || !*level) FLAGS_caffe2_log_level = 3;  // c10::GLOG_FATAL
}

}  // namespace ddp
