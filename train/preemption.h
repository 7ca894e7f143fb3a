// Preemption: SIGTERM/SIGINT set a flag the trainer checks at step boundaries; a second signal exits at once.
#pragma once

namespace ddp {

void install_preemption_handlers();
// Signal number received (0 = none).
int preemption_signal();

}  // namespace ddp
