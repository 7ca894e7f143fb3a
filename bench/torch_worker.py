# Python reference worker for ddp_bench.py: one rank of a PyTorch DDP (or sync-off) training loop, timed per interval.
#
# Launched like a torchrun worker (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, OMP_NUM_THREADS set by the harness).
# Mirrors ddptrain's loop: uint8 images normalised per batch; per step zero_grad, forward (under autocast for bf16),
# fp32 loss, backward, step, loss.item() and the correct count; every --log-every steps (and at the last step / an
# epoch end) the interval's loss, correct and samples are all-reduced (sync on) and its samples and seconds recorded.
# A world of one runs without a process group or DDP, as ddptrain does.
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from ddp_reference import Net, find  # noqa: E402


def build_model(name, dropout):
    if name == "net":
        return Net(dropout)
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def use_ddptrain_kernels(model, name):
    """ddptrain's convolution choices in Python (model.memory_format = auto, model.skip_padding_taps = true):
    channels_last for Net; for ResNet, kernel taps that only read zero padding left out (models/conv.cpp)."""
    if name == "net":
        return model.to(memory_format=torch.channels_last)

    def live_taps(size, kernel, padding, stride, dilation):
        outputs = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
        taps = [k for k in range(kernel)
                if any(0 <= o * stride - padding + k * dilation < size for o in range(outputs))]
        return outputs, taps

    def cropped_forward(conv):
        def forward(x):
            weight, padding = conv.weight, list(conv.padding)
            for d in (0, 1):
                size, kernel = x.shape[2 + d], weight.shape[2 + d]
                outputs, taps = live_taps(size, kernel, padding[d], conv.stride[d], conv.dilation[d])
                if not taps or (taps[0] == 0 and taps[-1] == kernel - 1):
                    continue
                new_padding, new_kernel = padding[d] - taps[0] * conv.dilation[d], taps[-1] - taps[0] + 1
                span = conv.dilation[d] * (new_kernel - 1)
                if new_padding < 0 or (size + 2 * new_padding - span - 1) // conv.stride[d] + 1 != outputs:
                    continue
                weight, padding[d] = weight.narrow(2 + d, taps[0], new_kernel), new_padding
            return F.conv2d(x, weight, conv.bias, conv.stride, padding, conv.dilation, conv.groups)
        return forward

    for m in model.modules():
        if isinstance(m, nn.Conv2d) and isinstance(m.padding, tuple) and m.padding_mode == "zeros":
            m.forward = cropped_forward(m)
    return model


def read_idx_uint8(path):
    """An IDX file (raw or .gz) as a uint8 tensor, read into one buffer (no transient copies)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        header = f.read(4)
        dims = struct.unpack(">" + "I" * header[3], f.read(4 * header[3]))
        buffer = bytearray(math.prod(dims))
        if f.readinto(buffer) != len(buffer):
            raise ValueError(f"{path}: truncated")
    return torch.frombuffer(buffer, dtype=torch.uint8).reshape(dims)


def load_train_set(args):
    """uint8 images [N, 1, 28, 28] and int64 labels; like ddptrain, batches are normalised as they are used."""
    if args.data == "synthetic":
        gen = torch.Generator().manual_seed(args.seed)
        x = torch.randint(0, 256, (args.synthetic_size, 1, 28, 28), generator=gen, dtype=torch.uint8)
        y = torch.randint(0, 10, (args.synthetic_size,), generator=gen)
        return TensorDataset(x, y)
    images = read_idx_uint8(find(args.data_dir, "train-images-idx3-ubyte"))
    labels = read_idx_uint8(find(args.data_dir, "train-labels-idx1-ubyte")).long()
    return TensorDataset(images.unsqueeze(1), labels)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["net", "resnet18"], required=True)
    p.add_argument("--data", choices=["fashion-mnist", "synthetic"], required=True)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--init", required=True, help="state dict (torch.save) both sides start from")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--sync", choices=["on", "off"], default="on")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--log-every", type=int, required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mean", type=float, default=0.2860)
    p.add_argument("--std", type=float, default=0.3530)
    p.add_argument("--synthetic-size", type=int, default=6000)
    p.add_argument("--kernels", choices=["plain", "ddptrain"], default="plain",
                   help="plain: the model as PyTorch users write it; ddptrain: ddptrain's convolution choices")
    p.add_argument("--result", required=True, help="JSON file this rank writes its intervals to")
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    sync = args.sync == "on" and world > 1  # a world of one runs without a process group, as ddptrain does
    if sync:
        dist.init_process_group("gloo")
    torch.manual_seed(args.seed + rank)
    model = build_model(args.model, args.dropout)
    model.load_state_dict(torch.load(args.init))
    if args.kernels == "ddptrain":
        model = use_ddptrain_kernels(model, args.model)
    model.train()
    trained = DDP(model) if sync else model
    dataset = load_train_set(args)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=0)
    opt = torch.optim.SGD(trained.parameters(), lr=args.lr, momentum=args.momentum)
    log_probs = args.model == "net"
    step, epoch, intervals = 0, 0, []
    loss_sum = correct = samples = 0.0
    interval_start = time.perf_counter()
    while step < args.steps:
        sampler.set_epoch(epoch)
        for batch_index, (xb, yb) in enumerate(loader, start=1):
            xb = xb.to(torch.float32).div_(255).sub_(args.mean).div_(args.std)
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
                out = trained(xb)
            out = out.float()
            loss = F.nll_loss(out, yb) if log_probs else F.cross_entropy(out, yb)
            loss.backward()
            opt.step()
            step += 1
            loss_sum += loss.item() * len(yb)
            correct += out.detach().argmax(1).eq(yb).sum().item()
            samples += len(yb)
            last = step == args.steps
            if step % args.log_every == 0 or last or batch_index == len(loader):
                totals = torch.tensor([loss_sum, correct, samples], dtype=torch.float64)
                if sync:
                    dist.all_reduce(totals)
                elapsed = time.perf_counter() - interval_start
                intervals.append([step, totals[2].item(), elapsed])
                if rank == 0:
                    print(f"step {step}/{args.steps} loss {totals[0].item() / totals[2].item():.4f} "
                          f"samples/s {totals[2].item() / elapsed:.0f}", flush=True)
                loss_sum = correct = samples = 0.0
                interval_start = time.perf_counter()
            if last:
                break
        epoch += 1
    with open(args.result, "w") as f:
        json.dump({"rank": rank, "world": world, "sync": sync, "intervals": intervals}, f)
    if sync:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
