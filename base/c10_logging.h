// quiet_c10_logging: c10/c10d log only fatal messages unless TORCH_CPP_LOG_LEVEL asks for more.
#pragma once

namespace ddp {

// ddptrain and ddprun report failures themselves, as one `error:` line; c10d's own warnings (the store, Gloo,
// NCCL's watchdog) are noise to a user. TORCH_CPP_LOG_LEVEL (INFO, WARNING, ERROR, FATAL) brings them back.
void quiet_c10_logging();

}  // namespace ddp
