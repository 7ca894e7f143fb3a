# Python DDP reference on CIFAR-10's binary batches (oracle for tests): a torchvision model (ResNet, ConvNeXt, ViT at
# 32x32; model.dropout and model.stochastic_depth as --dropout and --stochastic-depth, unset: torchvision's defaults),
# PyTorch's DDP and DistributedSampler, ToTensor + Normalize with per-channel mean and std, SGD with momentum.
#
# Launched like a torchrun worker: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by the caller.
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import (CIFAR10_TRAIN_FILES, POWERSGD_ARGUMENTS, build_model, ddp_train_and_save,  # noqa: E402
                             parse_arguments, read_cifar10)

MEAN, STD = [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]  # ddptrain's data.mean / data.std for cifar10


def main():
    args = parse_arguments(POWERSGD_ARGUMENTS + [("out", str, None), ("steps", int, 4), ("momentum", float, 0.9),
                                                 ("threads", int, 1), ("model", str, "resnet18"),
                                                 ("dropout", float, None), ("stochastic_depth", float, None)])
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    model = build_model(args.model, dropout=args.dropout, in_channels=3, num_classes=10,
                        stochastic_depth=args.stochastic_depth, image_size=32)
    model.load_state_dict(torch.load(args.init))
    images, labels = read_cifar10(args.data, CIFAR10_TRAIN_FILES)
    mean = torch.tensor(MEAN, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float32).view(1, 3, 1, 1)
    x = images.to(torch.float32).div(255).sub(mean).div(std)  # ToTensor, then Normalize(MEAN, STD)
    ddp_train_and_save(model, x, labels, args, F.cross_entropy)


if __name__ == "__main__":
    main()
