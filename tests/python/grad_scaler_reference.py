# AMP oracle for tests: torch.autocast("cpu", bf16 | fp16) forwards, and torch.amp.GradScaler("cpu") driving training.
#
# PyTorch 2.x runs GradScaler on CPU as it is (its unscale_/step/update/state_dict logic on ATen's CPU kernels of
# _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_): the oracle is the real class, unpatched.
#
#   autocast-forward --model M.pt --input X.pt --out OUT.pt [--dtype bf16|fp16]
#         Net(0).eval() forward under autocast -> {"out"}
#   train --model M.pt --batch B.pt --out OUT.pt --arch linear|net [--autocast] [--dtype bf16|fp16] --init-scale S
#         --growth-interval N --growth-factor G --backoff-factor B
#         --steps K --inf-steps 3,7 --nan-steps 9 --lr LR --momentum MU [--reduction sum]
#         [--sgd-kernels for_loop|foreach|fused]
#         -> OUT.pt {scales, trackers, skipped, losses, param.*, momentum.*} and OUT.pt.scaler (scaler.state_dict())
#   load-state --state S.pt --out OUT.pt    GradScaler("cpu").load_state_dict(S); torch.save(state_dict()) -> OUT
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import Net  # noqa: E402


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


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
    with torch.no_grad(), torch.autocast("cpu", dtype=DTYPES[args.dtype]):
        out = model(x)
    torch.save({"out": out}, args.out)


def train(args):
    model = nn.Linear(4, 3) if args.arch == "linear" else Net(0.0)
    model.load_state_dict(torch.load(args.model))
    model = in_memory_format(model, args)
    batch = torch.load(args.batch)
    x, y = batch["x"], batch["y"]
    kernels = {"for_loop": dict(foreach=False), "foreach": dict(foreach=True), "fused": dict(fused=True)}
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, **kernels[args.sgd_kernels])
    scaler = torch.amp.GradScaler("cpu", init_scale=args.init_scale, growth_factor=args.growth_factor,
                                  backoff_factor=args.backoff_factor, growth_interval=args.growth_interval)
    inf_steps, nan_steps = steps_csv(args.inf_steps), steps_csv(args.nan_steps)
    scales, trackers, skipped, losses = [], [], [], []
    for step in range(args.steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=DTYPES[args.dtype], enabled=args.autocast):
            out = model(x)
            loss = F.mse_loss(out, y) if args.arch == "linear" else F.nll_loss(out, y, reduction=args.reduction)
        scaler.scale(loss).backward()
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
    scaler = torch.amp.GradScaler("cpu")
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
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
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
    p.add_argument("--sgd-kernels", default="for_loop", choices=["for_loop", "foreach", "fused"],
                   help="torch.optim.SGD(foreach=False), (foreach=True) or (fused=True)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    {"autocast-forward": autocast_forward, "train": train, "load-state": load_state}[args.mode](args)


if __name__ == "__main__":
    main()
