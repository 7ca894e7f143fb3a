# AMP oracle for tests: torch.autocast("cpu", bf16) forwards, and PyTorch's own GradScaler driving CPU training.
#
# torch.cuda.amp.GradScaler refuses CPU tensors in 1.13 only through CUDA-only kernels and asserts; this script
# runs the real class (its unscale_/step/update/state_dict logic) with those two kernels replaced by CPU mirrors
# of aten/src/ATen/native/cuda/AmpKernels.cu written in torch ops, so the scaler's control flow is PyTorch's.
#
#   autocast-forward --model M.pt --input X.pt --out OUT.pt    Net(0).eval() forward under autocast -> {"out"}
#   train --model M.pt --batch B.pt --out OUT.pt --arch linear|net [--autocast] --init-scale S --growth-interval N
#         --growth-factor G --backoff-factor B
#         --steps K --inf-steps 3,7 --nan-steps 9 --lr LR --momentum MU [--reduction sum]
#         -> OUT.pt {scales, trackers, skipped, losses, param.*, momentum.*} and OUT.pt.scaler (scaler.state_dict())
#   load-state --state S.pt --out OUT.pt    GradScaler().load_state_dict(S); torch.save(state_dict()) -> OUT
import argparse
import os
import sys

import torch
import torch.cuda.amp.grad_scaler as grad_scaler_module
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_reference import Net  # noqa: E402


def amp_update_scale_cpu(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    # amp_update_scale_cuda_kernel: one thread, float scale, int tracker, double factors (products in double).
    if found_inf.item():
        scale.fill_(scale.item() * backoff_factor)
        growth_tracker.fill_(0)
    else:
        successful = int(growth_tracker.item()) + 1
        if successful == growth_interval:
            new_scale = torch.tensor(scale.item() * growth_factor, dtype=torch.float32)
            if torch.isfinite(new_scale):  # do not grow the scale past fp32 bounds to inf
                scale.copy_(new_scale)
            growth_tracker.fill_(0)
        else:
            growth_tracker.fill_(successful)
    return scale


def amp_unscale_cpu(grads, found_inf, inv_scale):
    # _amp_foreach_non_finite_check_and_unscale_: flag non-finite inputs, then val * inv_scale in opmath, always.
    for g in grads:
        if not bool(torch.isfinite(g).all()):
            found_inf.fill_(1.0)
        opmath = torch.float64 if g.dtype == torch.float64 else torch.float32
        g.copy_((g.to(opmath) * inv_scale.to(opmath)).to(g.dtype))


class CpuReplicator(grad_scaler_module._MultiDeviceReplicator):
    def __init__(self, master_tensor):  # the original only asserts is_cuda
        self.master = master_tensor
        self._per_device_tensors = {}


def real_grad_scaler_on_cpu(**kwargs):
    grad_scaler_module.amp_definitely_not_available = lambda: False
    grad_scaler_module._MultiDeviceReplicator = CpuReplicator
    torch._amp_update_scale_ = amp_update_scale_cpu
    torch._amp_foreach_non_finite_check_and_unscale_ = amp_unscale_cpu
    return torch.cuda.amp.GradScaler(**kwargs)


def scale_loss(scaler, loss):
    # GradScaler.scale's tensor path without its is_cuda assert: lazy init on the loss's device, then multiply.
    if scaler._scale is None:
        scaler._lazy_init_scale_growth_tracker(loss.device)
    return loss * scaler._scale.to(device=loss.device, non_blocking=True)


def steps_csv(text):
    return {int(s) for s in text.split(",") if s}


def in_memory_format(model, args):
    # ddptrain's model.memory_format: channels_last runs the convolutions in NHWC (PyTorch's own recipe).
    return model.to(memory_format=torch.channels_last) if args.memory_format == "channels_last" else model


def autocast_forward(args):
    model = Net(0.0)
    model.load_state_dict(torch.load(args.model))
    model = in_memory_format(model, args)
    model.eval()
    x = torch.load(args.input)["x"]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    torch.save({"out": out}, args.out)


def train(args):
    model = nn.Linear(4, 3) if args.arch == "linear" else Net(0.0)
    model.load_state_dict(torch.load(args.model))
    model = in_memory_format(model, args)
    batch = torch.load(args.batch)
    x, y = batch["x"], batch["y"]
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    scaler = real_grad_scaler_on_cpu(init_scale=args.init_scale, growth_factor=args.growth_factor,
                                     backoff_factor=args.backoff_factor, growth_interval=args.growth_interval)
    inf_steps, nan_steps = steps_csv(args.inf_steps), steps_csv(args.nan_steps)
    scales, trackers, skipped, losses = [], [], [], []
    for step in range(args.steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
            out = model(x)
            loss = F.mse_loss(out, y) if args.arch == "linear" else F.nll_loss(out, y, reduction=args.reduction)
        scale_loss(scaler, loss).backward()
        first = next(model.parameters())
        if step in inf_steps:
            first.grad.view(-1)[0] = float("inf")
        if step in nan_steps:
            first.grad.view(-1)[-1] = float("nan")
        scaler.step(opt)
        # _maybe_opt_step's test: optimizer.step() ran iff the found_inf values sum to zero.
        found = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values())
        scaler.update()
        scales.append(scaler.get_scale())
        trackers.append(scaler._get_growth_tracker())
        skipped.append(1 if found else 0)
        losses.append(loss.item())
    result = {
        "scales": torch.tensor(scales, dtype=torch.float64),
        "trackers": torch.tensor(trackers, dtype=torch.int64),
        "skipped": torch.tensor(skipped, dtype=torch.int64),
        "losses": torch.tensor(losses, dtype=torch.float64),
    }
    for name, p in model.named_parameters():
        result["param." + name] = p.detach()
        buf = opt.state[p].get("momentum_buffer")
        if buf is not None:
            result["momentum." + name] = buf
    torch.save(result, args.out)
    torch.save(scaler.state_dict(), args.out + ".scaler")


def load_state(args):
    scaler = real_grad_scaler_on_cpu()
    scaler.load_state_dict(torch.load(args.state))
    torch.save(scaler.state_dict(), args.out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["autocast-forward", "train", "load-state"])
    p.add_argument("--model")
    p.add_argument("--state")
    p.add_argument("--input")
    p.add_argument("--batch")
    p.add_argument("--out", required=True)
    p.add_argument("--arch", default="linear", choices=["linear", "net"])
    p.add_argument("--autocast", action="store_true")
    p.add_argument("--reduction", default="mean", choices=["mean", "sum"])
    p.add_argument("--init-scale", type=float, default=2.0**16)
    p.add_argument("--growth-factor", type=float, default=2.0)
    p.add_argument("--backoff-factor", type=float, default=0.5)
    p.add_argument("--growth-interval", type=int, default=2000)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--inf-steps", default="")
    p.add_argument("--nan-steps", default="")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory-format", default="contiguous", choices=["contiguous", "channels_last"])
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    {"autocast-forward": autocast_forward, "train": train, "load-state": load_state}[args.mode](args)


if __name__ == "__main__":
    main()
