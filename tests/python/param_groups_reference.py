# Param groups oracle for tests: torchvision's set_weight_decay groups (reference/torch_reference.py's
# weight_decay_groups) of torchvision's resnet18, the classic Net and a small module with every kind of norm layer,
# saved scripted for ddptrain's model.name = "torchscript"; and torch.optim stepping over those groups.
#
#   groups SCRIPT WD NORM BIAS [NORM BIAS ...]   saves the small module scripted to SCRIPT; for each model and each
#         (norm_weight_decay, bias_weight_decay) pair (-1: unset) prints "case MODEL NORM BIAS", then one line per
#         group: "group WEIGHT_DECAY NAME ..."
#   steps SCRIPT OUT_PREFIX STEPS WD NORM BIAS   saves the small module scripted to SCRIPT; for each optimizer case
#         of CASES, steps torch.optim over its groups STEPS times, parameter i's gradient at step t being
#         torch.randn(shape) after torch.manual_seed(1000 * t + i) (i over named_parameters() that require grad) and
#         lr 0.1 * (t + 1) / STEPS for every group; saves the state dict to OUT_PREFIX + case + ".pt"
import copy
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import build_model, weight_decay_groups  # noqa: E402

# name: (torch.optim class, its arguments besides the groups and lr); ddptrain's optimizer.* keys in the test.
CASES = {
    "sgd": (torch.optim.SGD, {"momentum": 0.9, "foreach": False}),
    "sgd_foreach": (torch.optim.SGD, {"momentum": 0.9, "nesterov": True, "foreach": True}),
    "sgd_fused": (torch.optim.SGD, {"momentum": 0.9, "fused": True}),
    "adamw": (torch.optim.AdamW, {"foreach": False}),
    "adamw_foreach": (torch.optim.AdamW, {"amsgrad": True, "foreach": True}),
    "adamw_fused": (torch.optim.AdamW, {"fused": True}),
    "adam_foreach": (torch.optim.Adam, {"foreach": True}),
    "rmsprop_foreach": (torch.optim.RMSprop, {"momentum": 0.5, "foreach": True}),
}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.lrn = nn.LocalResponseNorm(2)

    def forward(self, x):
        return self.lrn(self.inorm(self.gn(self.bn(self.conv(x)))))


class Small(nn.Module):
    """Own parameters before its children's (one frozen), BatchNorm, GroupNorm, InstanceNorm, LocalResponseNorm and
    LayerNorm layers, a conv and a linear with biases."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.frozen = nn.Parameter(torch.zeros(4), requires_grad=False)
        self.block = Block()
        self.ln = nn.LayerNorm(4)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(self.ln(self.block(x).mean((2, 3)) * self.scale + self.frozen))


def small(script_path):
    torch.manual_seed(0)
    model = Small()
    with torch.no_grad():  # norm layers' weights and biases other than torch's 1 and 0, so that weight decay shows
        for p in model.parameters():
            p.add_(torch.rand(p.shape) * 0.5)
    torch.jit.save(torch.jit.script(model), script_path)
    return model


def unset_as_none(value):
    return value if value >= 0 else None


def cmd_groups(argv):
    script, wd, pairs = argv[0], float(argv[1]), argv[2:]
    models = {"resnet18": build_model("resnet18", in_channels=1, num_classes=10), "net": build_model("net"),
              "torchscript": small(script)}
    for name, model in models.items():
        for norm, bias in zip(pairs[0::2], pairs[1::2]):
            print("case", name, norm, bias)
            for g in weight_decay_groups(model, wd, unset_as_none(float(norm)), unset_as_none(float(bias))):
                print("group", repr(g["weight_decay"]), " ".join(g["names"]))


def cmd_steps(argv):
    script, prefix, steps = argv[0], argv[1], int(argv[2])
    wd, norm, bias = float(argv[3]), unset_as_none(float(argv[4])), unset_as_none(float(argv[5]))
    init = small(script)
    for case, (optimizer, kwargs) in CASES.items():
        model = copy.deepcopy(init)
        groups = [{"params": g["params"], "weight_decay": g["weight_decay"]}
                  for g in weight_decay_groups(model, wd, norm, bias)]
        opt = optimizer(groups, lr=0.1, **kwargs)
        trained = [p for _, p in model.named_parameters() if p.requires_grad]
        for t in range(steps):
            for i, p in enumerate(trained):
                torch.manual_seed(1000 * t + i)
                p.grad = torch.randn(p.shape)
            for g in opt.param_groups:
                g["lr"] = 0.1 * (t + 1) / steps
            opt.step()
        torch.save(dict(model.state_dict()), prefix + case + ".pt")


def main():
    torch.set_num_threads(1)
    {"groups": cmd_groups, "steps": cmd_steps}[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
