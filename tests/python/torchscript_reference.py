# A model of the user's own, for ddptrain's model.name = "torchscript" (oracle for tests):
#   make PATH [--seed S] [--kind K]  torch.jit.script of ResidualNet (or SpareHeadNet, Pair) initialised under
#                                     manual_seed(S), saved
#   train --data DIR --init PATH ...  Python DDP on the eager ResidualNet (or SpareHeadNet: --kind spare) with the
#                                     scripted file's weights (a torchrun worker: RANK, WORLD_SIZE, MASTER_ADDR,
#                                     MASTER_PORT set); --find-unused 1: DDP(find_unused_parameters=True),
#                                     --static-graph 1: DDP(static_graph=True)
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import add_arguments, ddp_train_and_save, find, read_idx, TRAINING_ARGUMENTS  # noqa: E402


class ResidualNet(nn.Module):
    """Convolutions with BatchNorm, a residual branch, dropout (off by default) and a linear head: 1x28x28 -> 10."""

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(8 * 7 * 7, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.stem(x)))
        x = F.relu(x + self.block(x))
        x = F.max_pool2d(x, 4)
        return self.fc(self.drop(torch.flatten(x, 1)))


class SpareHeadNet(ResidualNet):
    """ResidualNet with a second head its forward never uses: DDP trains it only with find_unused_parameters."""

    def __init__(self):
        super().__init__()
        self.spare = nn.Linear(8 * 7 * 7, 10)


class Pair(nn.Module):
    """A module whose forward returns a tuple: not logits."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(28 * 28, 10)

    def forward(self, x: torch.Tensor):
        y = self.fc(torch.flatten(x, 1))
        return y, y


MODELS = {"residual": ResidualNet, "spare": SpareHeadNet, "pair": Pair}


def make(args):
    torch.manual_seed(args.seed)
    model = MODELS[args.kind]()
    torch.jit.script(model).save(args.path)


def train(args):
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    model = MODELS[args.kind]()
    model.load_state_dict(torch.jit.load(args.init).state_dict())
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte")).long()
    x = images.unsqueeze(1).to(torch.float32).div(255).sub(args.mean).div(args.std)
    ddp_train_and_save(model, x, labels, args, F.cross_entropy)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("path")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kind", default="residual")
    p = sub.add_parser("train")
    extra = [("out", str, None), ("steps", int, 20), ("momentum", float, 0.9), ("threads", int, 1),
             ("ema_decay", float, 0.0), ("ema_out", str, None), ("amp", str, ""), ("kind", str, "residual"),
             ("find_unused", int, 0), ("static_graph", int, 0), ("ema_steps", int, 1), ("ema_restart_through", int, 0),
             ("ema_adjust_epochs", int, 0), ("warmup_steps", int, 0), ("warmup_start_factor", float, 0.0),
             ("ra_reps", int, 0), ("label_smoothing", float, 0.0)]
    add_arguments(p, {name: (name, kind, default) for name, kind, default in TRAINING_ARGUMENTS + extra}.values())
    args = parser.parse_args()
    {"make": make, "train": train}[args.command](args)


if __name__ == "__main__":
    main()
