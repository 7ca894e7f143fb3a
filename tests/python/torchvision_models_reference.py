# Oracle for ddptrain's torchvision models (tests/models/torchvision_models_test.cpp): torchvision's state dict and
# eval forward to load and match, and the strict load and init statistics of ddptrain's state dict.
#
#   fresh --model NAME --seed S --size N --out-dir DIR: DIR/torchvision.pt, torchvision's model (3 channels, 10
#       classes) initialised under torch.manual_seed(S), its BatchNorm statistics and affines, biases and head moved
#       off their init so that the eval forward depends on each; DIR/io.pt, {"x": 2x3xNxN input, "y": its eval output,
#       "y_train": its train-mode output after torch.manual_seed(S + 1), with torchvision's default dropout and
#       stochastic depth drawing their masks}.
#   check --model NAME --seed S --state PATH: PATH (ddptrain's state dict, as model.pt is written) has torchvision's
#       keys in torchvision's order and loads with load_state_dict(strict=True); each entry's values are distributed
#       as a fresh torchvision init's (under torch.manual_seed(S)): constants equal, random ones with the same mean and
#       std within sampling error, uniform where torchvision's is uniform. Exit 1 listing what differs.
import argparse
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import build_model  # noqa: E402


def model_of(name):
    return build_model(name, in_channels=3, num_classes=10)


def fresh(args):
    torch.manual_seed(args.seed)
    model = model_of(args.model)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.running_var.uniform_(0.5, 1.5)
                m.running_mean.normal_(0, 0.1)
            if getattr(m, "bias", None) is not None:
                m.bias.normal_(0, 0.1)
            if isinstance(m, nn.Linear):
                m.weight.normal_(0, 1 / math.sqrt(m.in_features))
    torch.save(dict(model.state_dict()), os.path.join(args.out_dir, "torchvision.pt"))
    x = torch.randn(2, 3, args.size, args.size)
    with torch.no_grad():
        y = model.eval()(x)
        torch.manual_seed(args.seed + 1)
        y_train = model.train()(x)
    torch.save({"x": x, "y": y, "y_train": y_train}, os.path.join(args.out_dir, "io.pt"))


def distribution_differences(name, ours, ref):
    """What differs between the distributions the values of ours and ref (one state-dict entry) were drawn from."""
    if ref.dtype != ours.dtype or ref.shape != ours.shape:
        return [f"{name}: {ours.dtype} {tuple(ours.shape)}, torchvision {ref.dtype} {tuple(ref.shape)}"]
    if not ref.is_floating_point() or ref.numel() == 1 or bool((ref == ref.flatten()[0]).all()):
        return [] if torch.equal(ours, ref) else [f"{name}: not torchvision's constant {ref.flatten()[0].item()}"]
    n = ref.numel()
    ref_std, our_std = ref.double().std().item(), ours.double().std().item()
    out = []
    slack = 6 * ref_std / math.sqrt(n)  # six standard errors of the mean, a little over those of the std
    if abs(ours.double().mean().item() - ref.double().mean().item()) > 2 * slack:
        out.append(f"{name}: mean {ours.double().mean().item():.4g}, torchvision {ref.double().mean().item():.4g}")
    if abs(our_std - ref_std) > slack:
        out.append(f"{name}: std {our_std:.4g}, torchvision {ref_std:.4g}")
    if n >= 1000:  # uniform: every |x| within sqrt(3) std; a normal's 1000 draws go past it
        uniform_ref = ref.abs().max().item() <= 1.75 * ref_std
        if (ours.abs().max().item() <= 1.75 * our_std) != uniform_ref:
            out.append(f"{name}: {'not ' if uniform_ref else ''}uniform, torchvision's {'is' if uniform_ref else 'not'}")
    return out


def check(args):
    # One intra-op thread: the summation order moves statistics by rounding only, and CTest runs tests two at a time,
    # where a second thread mostly waits for a core. fresh keeps the default, that of the forward ddptrain compares
    # with (a train-mode BatchNorm over 1x1 maps magnifies another order).
    torch.set_num_threads(1)
    ours = torch.load(args.state)
    model = model_of(args.model)
    expected = list(model.state_dict().keys())
    if list(ours.keys()) != expected:
        missing = [k for k in expected if k not in ours]
        extra = [k for k in ours if k not in model.state_dict()]
        sys.exit(f"keys differ from torchvision's (or their order): missing {missing[:5]}, unexpected {extra[:5]}")
    model.load_state_dict(ours, strict=True)
    torch.manual_seed(args.seed)
    ref = model_of(args.model).state_dict()
    differences = [d for k in expected for d in distribution_differences(k, ours[k], ref[k])]
    if differences:
        sys.exit("\n".join(differences))
    print(f"{len(expected)} entries loaded strictly, distributed as torchvision's init")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["fresh", "check"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--out-dir", dest="out_dir")
    parser.add_argument("--state")
    args = parser.parse_args()
    {"fresh": fresh, "check": check}[args.command](args)


if __name__ == "__main__":
    main()
