# Python DDP reference (oracle for tests): PyTorch's own DDP + DistributedSampler training the classic Net.
#
# Launched like a torchrun worker: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by the caller.
import argparse
import gzip
import os
import struct

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self, dropout=0.5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(dropout)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.dropout = dropout

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.reshape(-1, 320)  # a view when contiguous; a copy in NCHW order when channels_last
        x = F.relu(self.fc1(x))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim :]), dtype=torch.uint8).reshape(dims)


def find(dir_, base):
    for name in (base, base + ".gz"):
        if os.path.exists(os.path.join(dir_, name)):
            return os.path.join(dir_, name)
    raise FileNotFoundError(base)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mean", type=float, default=0.1307)
    p.add_argument("--std", type=float, default=0.3081)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    model = Net(0.0)
    model.load_state_dict(torch.load(args.init))
    ddp = DDP(model)
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte")).long()
    x = images.unsqueeze(1).to(torch.float32).div(255).sub(args.mean).div(args.std)
    dataset = TensorDataset(x, labels)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.nll_loss(ddp(xb), yb)
            loss.backward()
            opt.step()
            step += 1
            if step == args.steps:
                break
        epoch += 1
    if dist.get_rank() == 0:
        torch.save(dict(model.state_dict()), args.out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
