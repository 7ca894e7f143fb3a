// version_text: what `ddptrain --version` prints (ddptrain, LibTorch, CUDA/cuDNN/NCCL compiled in, GPUs visible).
#pragma once

#include <string>

namespace ddp {

std::string version_text();

}  // namespace ddp
