# Single-process reference for optimizer tests: PyTorch's SGD/AdamW/Adam/RMSprop, clip_grad_norm_, LR schedules, label smoothing.
#
# The schedule is PyTorch's own schedulers, stepped after each optimizer step: LinearLR from 1/warmup to 1 over the
# warmup steps, then (SequentialLR) CosineAnnealingLR to min_lr, StepLR or MultiStepLR; on the classic Net, data order
# of DistributedSampler(world 1).
# --device cuda: the same on the GPU, where torch.optim and clip_grad_norm_ take their multi-tensor (foreach) paths.
# --foreach 0|1, --fused 1: torch.optim's foreach and fused arguments (default: foreach=None, fused=None).
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import Net, find, parse_arguments, read_idx  # noqa: E402


def warmup_factor(step, warmup):
    """ddptrain's linear warmup, (step + 1) / warmup for the first warmup steps (LinearLR(1 / warmup, 1.0))."""
    return (step + 1) / warmup if step < warmup else 1.0


def make_scheduler(opt, a):
    lrs = torch.optim.lr_scheduler
    if a.decay == "cosine":
        decay = lrs.CosineAnnealingLR(opt, T_max=max(1, a.steps - a.warmup), eta_min=a.min_lr)
    elif a.decay == "step":
        decay = lrs.StepLR(opt, a.step_size, a.gamma)
    elif a.decay == "multistep":
        decay = lrs.MultiStepLR(opt, [int(m) for m in a.milestones.split(",")], a.gamma)
    else:
        decay = lrs.ConstantLR(opt, factor=1.0)
    if a.warmup == 0:
        return decay
    warm = lrs.LinearLR(opt, 1 / a.warmup, 1.0, total_iters=a.warmup - 1)
    return lrs.SequentialLR(opt, [warm, decay], milestones=[a.warmup])


def main():
    a = parse_arguments([("out", str, None), ("steps", int, 10), ("optimizer", str, "sgd"), ("weight_decay", float, 0.0),
                         ("nesterov", int, 0), ("clip", float, 0.0), ("warmup", int, 0), ("decay", str, "none"),
                         ("min_lr", float, 0.0), ("step_size", int, 1000), ("gamma", float, 0.1),
                         ("label_smoothing", float, 0.0), ("device", str, "cpu"), ("amsgrad", int, 0),
                         ("milestones", str, ""), ("foreach", int, -1), ("fused", int, 0),
                         ("alpha", float, 0.99), ("centered", int, 0)])
    torch.set_num_threads(1)
    device = torch.device(a.device)
    model = Net(0.0)
    model.load_state_dict(torch.load(a.init))
    model.to(device)
    images = read_idx(find(a.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(a.data, "train-labels-idx1-ubyte")).long()
    x = images.unsqueeze(1).to(torch.float32).div(255).sub(a.mean).div(a.std)
    ds = TensorDataset(x, labels)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=a.seed)
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler)
    # torch.optim's implementation: foreach -1 (None: its default for the device), 0 or 1; fused 1.
    kernels = {"foreach": None if a.foreach < 0 else bool(a.foreach)}
    if a.fused:
        kernels = {"fused": True}
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay,
                              nesterov=bool(a.nesterov), **kernels)
    elif a.optimizer == "rmsprop":
        opt = torch.optim.RMSprop(model.parameters(), lr=a.lr, alpha=a.alpha, momentum=a.momentum,
                                  centered=bool(a.centered), weight_decay=a.weight_decay, **kernels)
    else:
        adam = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[a.optimizer]
        opt = adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay, amsgrad=bool(a.amsgrad), **kernels)
    sched = make_scheduler(opt, a)
    step, epoch = 0, 0
    while step < a.steps:
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            # CrossEntropyLoss on Net's log-probabilities: log_softmax leaves them as they are.
            loss = (F.cross_entropy(model(xb), yb, label_smoothing=a.label_smoothing) if a.label_smoothing > 0
                    else F.nll_loss(model(xb), yb))
            loss.backward()
            # max_norm inf only measures (the clip coefficient clamps to 1.0).
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip if a.clip > 0 else float("inf"))
            print("grad_norm %.9g" % norm.item())
            opt.step()
            sched.step()
            step += 1
            if step == a.steps:
                break
        epoch += 1
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, a.out)


if __name__ == "__main__":
    main()
