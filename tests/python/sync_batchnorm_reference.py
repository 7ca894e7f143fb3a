# Python DDP with torch.nn.SyncBatchNorm (oracle for model.sync_batchnorm): torchvision's ResNet with a 1-channel stem,
# SyncBatchNorm.convert_sync_batchnorm, DDP over Gloo with CUDA tensors, every rank on cuda:0 (PyTorch's SyncBatchNorm
# runs on accelerators only, so this oracle needs a GPU).
#
# Launched like a torchrun worker: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by the caller.
#   make INIT.pt --seed S                   the initial weights (a plain state dict), under torch.manual_seed(S)
#   train --init INIT.pt --data DIR --out OUT.pt ...   trains and saves rank 0's state dict (CPU tensors)
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import build_model, ddp_train_and_save, find, parse_arguments, read_idx  # noqa: E402


def main():
    if sys.argv[1:2] == ["make"]:
        torch.manual_seed(int(sys.argv[sys.argv.index("--seed") + 1]))
        torch.save(dict(build_model("resnet18").state_dict()), sys.argv[2])
        return
    args = parse_arguments([("out", str, None), ("steps", int, 6), ("momentum", float, 0.9), ("threads", int, 1)],
                           sys.argv[2:])
    torch.set_num_threads(args.threads)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.allow_tf32 = False
    dist.init_process_group("gloo")
    torch.cuda.set_device(0)
    model = build_model("resnet18")
    model.load_state_dict(torch.load(args.init))
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model).cuda()
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte")).long().cuda()
    x = images.unsqueeze(1).to(torch.float32).div(255).sub(args.mean).div(args.std).cuda()
    ddp_train_and_save(model, x, labels, args, F.cross_entropy)


if __name__ == "__main__":
    main()
