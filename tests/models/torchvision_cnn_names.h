// The torchvision CNNs ddptrain builds natively whose tests compare them with torchvision, one name a line.
#pragma once

#include <string>
#include <vector>

namespace ddp::test {

inline const std::vector<std::string> kTorchvisionCnns = {
    "mobilenet_v3_large",
    "efficientnet_v2_s",
    "regnet_y_1_6gf",
};

}  // namespace ddp::test
