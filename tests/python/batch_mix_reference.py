# MixUp/CutMix oracle for tests: torchvision.transforms.v2's MixUp, CutMix and RandomChoice on a fixed batch, and
# torch.nn.functional.cross_entropy on the soft targets they give.
#
# Usage: batch_mix_reference.py OUT_DIR. Writes OUT_DIR/input.images.bin (float32 [B, C, H, W]), input.labels.bin
# (int64 [B]), logits.bin (float32 [B, K]); per case NAME.images.bin and NAME.targets.bin (float32 [B, K]) and a
# line in cases.txt: "NAME mixup LAM 0 0 0 0", "NAME cutmix LAM R_X R_Y LAM_ADJUSTED X1 Y1 X2 Y2" (the fixed draws)
# or "NAME seeded MIXUP_ALPHA CUTMIX_ALPHA SEED nan 0 0 0 0"; losses.txt: "NAME VALUE" lines (repr of the float64
# value, or an integer count).
import math
import os
import sys

import torch
import torch.nn.functional as F
from torchvision.transforms import v2

B, C, H, W, K = 6, 3, 11, 13, 5


def write(path, t):
    with open(path, "wb") as f:
        f.write(t.contiguous().numpy().tobytes())


class FixedDraws:
    """torch.randint and the transform's Beta sample replaced by given values (CutMix.make_params's draws)."""

    def __init__(self, transform, lam, randints):
        self.transform, self.lam, self.randints = transform, lam, list(randints)

    def __enter__(self):
        self.saved_dist, self.saved_randint = self.transform._dist, torch.randint
        lam = self.lam

        class Dist:
            def sample(self, shape):
                return torch.tensor([lam])

        self.transform._dist = Dist()
        values = self.randints
        torch.randint = lambda high, size: torch.tensor([values.pop(0)])
        return self

    def __exit__(self, *exc):
        self.transform._dist, torch.randint = self.saved_dist, self.saved_randint


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(7)
    images = torch.randn(B, C, H, W, generator=g)
    labels = torch.randint(K, (B,), generator=g)
    logits = torch.randn(B, K, generator=g)
    write(os.path.join(out, "input.images.bin"), images)
    write(os.path.join(out, "input.labels.bin"), labels)
    write(os.path.join(out, "logits.bin"), logits)
    lines, losses = [], []

    def record(name, kind, params, result):
        mixed, targets = result
        write(os.path.join(out, name + ".images.bin"), mixed)
        write(os.path.join(out, name + ".targets.bin"), targets)
        box = params.get("box", (0, 0, 0, 0))
        lam = params.get("lam", params.get("lam_adjusted"))
        lines.append(f"{name} {kind} {lam!r} {box[0]} {box[1]} {box[2]} {box[3]}")

    # Fixed draws: MixUp's lam; CutMix's lam and box centre (one clamped at the corner).
    mixup = v2.MixUp(alpha=1.0, num_classes=K)
    with FixedDraws(mixup, 0.3, []):
        params = {"labels": labels, "batch_size": B, **mixup.make_params([images])}
        record("mixup_fixed", "mixup", params, (mixup.transform(images, params), mixup.transform(labels, params)))
    cutmix = v2.CutMix(alpha=1.0, num_classes=K)
    for name, lam, rx, ry in [("cutmix_fixed", 0.62, 3, 9), ("cutmix_edge", 0.05, 0, H - 1)]:
        with FixedDraws(cutmix, lam, [rx, ry]):
            params = {"labels": labels, "batch_size": B, **cutmix.make_params([images])}
        record(name, f"cutmix {lam!r} {rx} {ry}", dict(params, lam=params["lam_adjusted"]),
               (cutmix.transform(images, params), cutmix.transform(labels, params)))

    # The draws themselves: RandomChoice as references/classification/train.py's get_mixup_cutmix builds it, run
    # from torch.manual_seed(seed) (the kind chosen is read back from which transform's output it equals).
    choices = [("choice", 0.2, 1.0, s) for s in range(6)] + [("mixup_only", 0.8, 0.0, 3), ("cutmix_only", 0.0, 1.0, 4)]
    for prefix, ma, ca, seed in choices:
        transforms = []
        if ma > 0:
            transforms.append(v2.MixUp(alpha=ma, num_classes=K))
        if ca > 0:
            transforms.append(v2.CutMix(alpha=ca, num_classes=K))
        torch.manual_seed(seed)
        result = v2.RandomChoice(transforms)(images, labels)
        record(f"{prefix}_s{seed}", f"seeded {ma!r} {ca!r} {seed}", {"lam": float("nan")}, result)

    # The soft-target loss, with and without label smoothing, on logits and on log-probabilities; and the
    # index-target loss.
    targets = mixup.transform(labels, {"labels": labels, "batch_size": B, "lam": 0.3})
    log_probs = F.log_softmax(logits, dim=1)
    for ls in [0.0, 0.1]:
        losses.append(f"soft_logits_{ls} {F.cross_entropy(logits, targets, label_smoothing=ls).double().item()!r}")
        losses.append(f"soft_logprobs_{ls} {F.cross_entropy(log_probs, targets, label_smoothing=ls).double().item()!r}")
        losses.append(f"hard_logits_{ls} {F.cross_entropy(logits, labels, label_smoothing=ls).double().item()!r}")
    losses.append(f"hard_logprobs_0.0 {F.nll_loss(log_probs, labels).double().item()!r}")
    # references/classification/utils.accuracy on 2-D targets: target.max(dim=1)[1].
    losses.append(f"correct_soft {int(logits.argmax(1).eq(targets.max(dim=1)[1]).sum())}")
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "losses.txt"), "w") as f:
        f.write("\n".join(losses) + "\n")


if __name__ == "__main__":
    main()
