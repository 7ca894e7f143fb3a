# torchvision's convnext_tiny and vit_b_16 as the oracle of tests/models/torchvision_transformers_test.cpp: fresh state
# dicts and eval outputs to compare against, ddptrain's state dicts loaded strictly with their init statistics
# checked, FLOPs per training sample as FlopCounterMode counts them.
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import build_model  # noqa: E402


def model_of(args):
    return build_model(args.model, dropout=0.0, in_channels=args.in_channels, num_classes=args.classes,
                       image_size=args.side)


def fresh(args):
    """The fresh model's state dict (args.out, when given); with args.perturbed, the state dict after every tensor
    moved by normal(std 0.02) noise (so that the zero head and the 1e-6 layer scales let each layer show in the
    output) as args.perturbed, with args.io holding an input batch and that model's eval output on it."""
    torch.manual_seed(args.seed)
    model = model_of(args)
    if args.out is not None:
        torch.save(dict(model.state_dict()), args.out)
    if args.perturbed is None:
        return
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
        torch.save(dict(model.state_dict()), args.perturbed)
        x = torch.randn(3, args.in_channels, args.side, args.side)
        torch.save({"input": x, "output": model.eval()(x)}, args.io)


def quantile(x, q):
    """torch.quantile(x, q) of a 1-D tensor (linear interpolation between the order statistics around q (n - 1)),
    from the two order statistics found by selection (kthvalue) rather than by sorting all of x."""
    n = x.numel()
    position = q * (n - 1)
    below = math.floor(position)
    lower, upper = (x.kthvalue(k + 1).values for k in (below, min(below + 1, n - 1)))
    return torch.lerp(lower, upper, position - below)


def statistics_differ(name, ours, theirs):
    """Why `ours` does not look drawn like torchvision's `theirs` (constants must be equal; random tensors agree in
    std within a tenth of torchvision's, in mean within two tenths of its std, and in the 95th percentile of |x|
    within 15%, which tells a normal draw (1.96 std) from a uniform one (1.65 std)), or "". (Not the maximum:
    trunc_normal_'s uniform draw can hit its lower end, whose erfinv is -inf, clamped to -2, in either model.)"""
    ours, theirs = ours.double(), theirs.double()
    if ours.shape != theirs.shape:
        return f"{name}: shape {tuple(ours.shape)} vs {tuple(theirs.shape)}"
    std = theirs.std().item() if theirs.numel() > 1 else 0.0
    if std == 0.0:
        return "" if torch.equal(ours, theirs) else f"{name}: torchvision's is constant {theirs.flatten()[0].item()}"
    m_o, m_t, s_o = ours.mean().item(), theirs.mean().item(), ours.std().item()
    a_o, a_t = (quantile(t.flatten()[:100000].abs(), 0.95).item() for t in (ours, theirs))  # iid draws
    if abs(s_o - std) > 0.1 * std or abs(m_o - m_t) > 0.2 * std or abs(a_o - a_t) > 0.15 * a_t:
        return f"{name}: mean {m_o:.4g} std {s_o:.4g} |x| q95 {a_o:.4g} vs torchvision's {m_t:.4g} {std:.4g} {a_t:.4g}"
    return ""


def check(args):
    """args.weights (ddptrain's model.pt format) loads strictly into torchvision's model, and each tensor looks
    drawn as torchvision's fresh model draws it."""
    # One intra-op thread: the summation order moves statistics by rounding only, and CTest runs tests two at a time,
    # where a second thread mostly waits for a core. fresh keeps the default: ddptrain compares its forward.
    torch.set_num_threads(1)
    ours = torch.load(args.weights)
    torch.manual_seed(args.seed)
    model = model_of(args)
    theirs = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(ours, strict=True)
    print(f"loaded strictly: {len(ours)} entries")
    problems = [p for p in (statistics_differ(k, ours[k], theirs[k]) for k in theirs) if p]
    print("\n".join(problems[:10] + [f"({len(problems)} tensors differ)"]) if problems
          else f"init statistics agree: {len(theirs)} tensors")
    return 1 if problems else 0


def flops(args):
    """FlopCounterMode's FLOPs per sample of one training forward and backward (cross-entropy) on args.batch images."""
    from torch.utils.flop_counter import FlopCounterMode
    torch.set_num_threads(1)  # a count, whatever the summation order: one thread, as check
    model = model_of(args).train()
    x = torch.randn(args.batch, args.in_channels, args.side, args.side)
    y = torch.randint(0, args.classes, (args.batch,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    print(counter.get_total_flops() / args.batch)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["fresh", "check", "flops"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--in-channels", dest="in_channels", type=int, default=3)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=2)
    for name in ("out", "perturbed", "io", "weights"):
        parser.add_argument("--" + name)
    args = parser.parse_args()
    sys.exit({"fresh": fresh, "check": check, "flops": flops}[args.command](args) or 0)


if __name__ == "__main__":
    main()
