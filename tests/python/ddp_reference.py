# Python DDP reference (oracle for tests): PyTorch's own DDP + DistributedSampler training the classic Net, on the CPU
# over Gloo or with --device cuda on GPUs.
#
# Launched like a torchrun worker: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by the caller.
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import (POWERSGD_ARGUMENTS, Net, ddp_train_and_save, find, parse_arguments,  # noqa: E402
                             read_idx)


def main():
    args = parse_arguments(POWERSGD_ARGUMENTS + [("out", str, None), ("steps", int, 20), ("momentum", float, 0.9),
                                                 ("threads", int, 1), ("static_graph", int, 0),
                                                 # reference_optimizer's: timm.optim.Lars or Lamb and theirs
                                                 ("optimizer", str, "sgd"), ("nesterov", int, 0),
                                                 ("trust_coeff", float, 0.001), ("eps", float, 1e-8),
                                                 ("max_grad_norm", float, 1.0), ("trust_clip", int, 0),
                                                 ("always_adapt", int, 0), ("foreach", int, -1),
                                                 ("device", str, "cpu")])

    torch.set_num_threads(args.threads)
    backend, device = "gloo", torch.device("cpu")
    if args.device == "cuda":
        # As ddptrain's training.deterministic = true and training.cudnn_allow_tf32 = false; each rank on a GPU of its
        # own over NCCL where there are as many GPUs as ranks, else every rank on cuda:0 over Gloo with CUDA tensors.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.allow_tf32 = False
        world, gpus = int(os.environ["WORLD_SIZE"]), torch.cuda.device_count()
        backend = "nccl" if gpus >= world else "gloo"
        device = torch.device("cuda", int(os.environ["RANK"]) if gpus >= world else 0)
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    model = Net(0.0)
    model.load_state_dict(torch.load(args.init))
    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte")).long()
    x = images.unsqueeze(1).to(torch.float32).div(255).sub(args.mean).div(args.std)
    ddp_train_and_save(model.to(device), x.to(device), labels.to(device), args, F.nll_loss)


if __name__ == "__main__":
    main()
