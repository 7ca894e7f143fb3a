# Python DDP reference (oracle for tests): PyTorch's own DDP + DistributedSampler training the classic Net.
#
# Launched like a torchrun worker: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by the caller.
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import Net, find, parse_arguments, read_idx  # noqa: E402


def main():
    args = parse_arguments([("out", str, None), ("steps", int, 20), ("momentum", float, 0.9), ("threads", int, 1)])

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
