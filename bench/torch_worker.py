# Python reference worker for ddp_bench.py and gpu_bench.py: one rank of a PyTorch DDP (or sync-off) training loop,
# timed per interval.
#
# Launched like a torchrun worker (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, OMP_NUM_THREADS set by the
# harness). Mirrors ddptrain's loop: uint8 images normalised per batch; per step zero_grad, forward (under autocast for
# bf16/fp16), fp32 loss, backward (through torch.amp.GradScaler for fp16), step, the loss and the correct count; every
# --log-every steps (and at the last step / an epoch end) the interval's loss, correct and samples are all-reduced
# (sync on) and its samples and seconds recorded. A world of one runs without a process group or DDP, as ddptrain does.
#
# --device cpu (default; ddp_bench.py): loss.item() and the correct count every step, DataLoader(num_workers=0), Gloo.
# --device cuda (gpu_bench.py): the rank's GPU is cuda:LOCAL_RANK (shared round-robin when there are fewer GPUs);
# batches come from DataLoader(num_workers=--workers, pin_memory=True), are copied non_blocking and normalised on the
# GPU; loss and correct count stay on the GPU until the interval ends (one synchronisation per interval, as a Python
# user writing for speed would); NCCL; torch.cuda.max_memory_allocated() is reported as gpu_mem_peak_mib.
# --compile MODE: the model (the DDP module where there is one) goes through torch.compile(mode=MODE), the usual user
# recipe: TorchDynamo captures the forward, AOTAutograd its backward and Inductor compiles both at the first step
# ("max-autotune" also autotunes kernels there and runs the graphs as CUDA graphs through Inductor's CUDA graph trees);
# the loss, GradScaler and the optimizer step stay eager. The steps at which graphs were compiled are reported
# (compiled_at_steps), so that a harness can check its warm-up covered them.
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

# torchvision's ImageNet statistics (ddptrain's data.mean / data.std for image folders), as the pipeline bench has them
# (bench/ is this script's directory).
from data_bench import IMAGENET_MEAN, IMAGENET_STD

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from torch_reference import (add_arguments, build_model, find, leave_process_group, one_bucket_at_a_time,  # noqa: E402
                             read_idx)


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


def load_train_set(args):
    """uint8 images [N, C, S, S] and int64 labels; like ddptrain, batches are normalised as they are used. An image
    folder: torchvision's ImageFolder(DIR/train) with the v2 training transform on uint8 tensors (PILToTensor,
    RandomResizedCrop(image_size), RandomHorizontalFlip), decoded by the DataLoader's workers."""
    if args.data == "image_folder":
        from torchvision.datasets import ImageFolder
        from torchvision.transforms import v2
        transform = v2.Compose([v2.PILToTensor(), v2.RandomResizedCrop(args.image_size, antialias=True),
                                v2.RandomHorizontalFlip()])
        return ImageFolder(os.path.join(args.data_dir, "train"), transform=transform)
    if args.data == "synthetic":
        gen = torch.Generator().manual_seed(args.seed)
        shape = (args.synthetic_size, args.in_channels, args.image_size, args.image_size)
        x = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
        y = torch.randint(0, args.num_classes, (args.synthetic_size,), generator=gen)
        return TensorDataset(x, y)
    images = read_idx(find(args.data_dir, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data_dir, "train-labels-idx1-ubyte")).long()
    return TensorDataset(images.unsqueeze(1), labels)


class DaliLoader:
    """NVIDIA DALI's GPU pipeline over DIR/train, as DALI's ResNet-50 example builds it: fn.readers.file (sharded by
    rank, shuffled), fn.decoders.image_random_crop(device="mixed") (nvJPEG, RandomResizedCrop's area and ratio
    ranges), fn.resize to the crop size, fn.crop_mirror_normalize with a coin-flip mirror to uint8 CHW; batches of
    (uint8 images on the GPU, int64 labels), full ones only, normalised by the training loop as the others are."""

    def __init__(self, args, device, rank, world):
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        @pipeline_def(batch_size=args.batch, num_threads=args.workers, device_id=device.index, seed=args.seed + rank)
        def pipeline():
            jpegs, labels = fn.readers.file(file_root=os.path.join(args.data_dir, "train"), random_shuffle=True,
                                            shard_id=rank, num_shards=world, name="Reader")
            images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB)
            images = fn.resize(images, resize_x=args.image_size, resize_y=args.image_size)
            images = fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW",
                                              mirror=fn.random.coin_flip())
            return images, labels.gpu()

        pipe = pipeline()
        pipe.build()
        self.iterator = DALIGenericIterator(pipe, ["data", "label"], reader_name="Reader", auto_reset=True,
                                            last_batch_policy=LastBatchPolicy.DROP)

    def __len__(self):
        return len(self.iterator)

    def __iter__(self):
        for out in self.iterator:
            yield out[0]["data"], out[0]["label"].view(-1).long()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["net", "resnet18", "resnet50"], required=True)
    p.add_argument("--data", choices=["fashion-mnist", "synthetic", "image_folder"], required=True)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--init", required=True, help="state dict (torch.save) both sides start from")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="fp16: autocast to float16 with torch.amp.GradScaler")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto",
                   help="process group backend (auto: nccl on cuda, gloo on cpu; gloo on cuda takes CUDA tensors)")
    p.add_argument("--channels-last", action="store_true", help="model and inputs in torch.channels_last")
    p.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    p.add_argument("--workers", type=int, default=4,
                   help="DataLoader workers with --device cuda or --data image_folder (--loader dali: DALI's threads)")
    p.add_argument("--loader", choices=["dataloader", "dali"], default="dataloader",
                   help="dali (--data image_folder, CUDA): NVIDIA DALI's mixed pipeline instead of DataLoader; the "
                        "Python running this needs nvidia.dali (bench/requirements-dali.txt)")
    p.add_argument("--in-channels", type=int, default=1)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--image-size", type=int, default=28, help="synthetic images' side; image_folder: the crop's")
    p.add_argument("--sync", choices=["on", "off"], default="on")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--log-every", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    # The training options every reference script shares, with Fashion-MNIST's normalisation.
    add_arguments(p, [("batch", int, 64), ("lr", float, 0.01), ("momentum", float, 0.9), ("dropout", float, 0.5),
                      ("seed", int, 0), ("mean", float, 0.2860), ("std", float, 0.3530)])
    p.add_argument("--synthetic-size", type=int, default=6000)
    p.add_argument("--grad-compression", choices=["none", "fp16", "bf16", "powersgd"], default="none",
                   help="fp16, bf16: DDP's fp16_compress_hook or bf16_compress_hook "
                        "(torch.distributed.algorithms.ddp_comm_hooks.default_hooks); powersgd: powerSGD_hook with "
                        "--powersgd-rank and --powersgd-start-step, each bucket's future waited for in the hook "
                        "(Gloo aborts when several buckets' P and Q all-reduces interleave)")
    p.add_argument("--powersgd-rank", type=int, default=1, help="PowerSGDState's matrix_approximation_rank")
    p.add_argument("--powersgd-start-step", type=int, default=1000, help="PowerSGDState's start_powerSGD_iter")
    p.add_argument("--kernels", choices=["plain", "ddptrain"], default="plain",
                   help="plain: the model as PyTorch users write it; ddptrain: ddptrain's convolution choices")
    p.add_argument("--result", required=True, help="JSON file this rank writes its intervals to")
    p.add_argument("--trace-step", type=int, default=0,
                   help="trace this step (1-based) with torch.profiler into --trace: a Chrome trace whose \"step\" "
                        "range holds the step from zero_grad to its figures (the batch's loading and normalisation "
                        "before it are left out)")
    p.add_argument("--trace", help="the trace file --trace-step writes")
    p.add_argument("--compile", metavar="MODE",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                   help="torch.compile(model, mode=MODE); the optimizer step stays eager")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile's backend with --compile (eager: TorchDynamo's capture alone, no compiler)")
    p.add_argument("--drop-last", action="store_true",
                   help="DistributedSampler and DataLoader drop_last=True: every batch full, one input shape (a "
                        "partial last batch would make a compiled model recompile for its shape)")
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cuda = args.device == "cuda"
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
    else:
        device = torch.device("cpu")
    sync = args.sync == "on" and world > 1  # a world of one runs without a process group, as ddptrain does
    if sync:
        backend = args.backend if args.backend != "auto" else "nccl" if cuda else "gloo"
        dist.init_process_group(backend, device_id=device if backend == "nccl" else None)
    result = train(args, rank, world, device, sync)  # its DDP module is gone when it returns
    with open(args.result, "w") as f:
        json.dump(result, f)
    if sync:
        leave_process_group()


def graphs_compiled():
    """Graphs TorchDynamo has compiled in this process so far (its counters, torch._dynamo.utils.counters)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def train(args, rank, world, device, sync):
    """Trains args.steps steps; returns this rank's result: its timed intervals (and on CUDA its memory peak)."""
    cuda = device.type == "cuda"
    torch.manual_seed(args.seed + rank)
    model = build_model(args.model, args.dropout, args.in_channels, args.num_classes)
    model.load_state_dict(torch.load(args.init))
    if args.kernels == "ddptrain":
        model = use_ddptrain_kernels(model, args.model)
    model.to(device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    if args.channels_last:
        model.to(memory_format=torch.channels_last)
    model.train()
    trained = (DDP(model, device_ids=[device.index]) if cuda else DDP(model)) if sync else model
    if sync and args.grad_compression == "powersgd":
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=args.powersgd_start_step)
        trained.register_comm_hook(state, one_bucket_at_a_time(powersgd.powerSGD_hook))
    elif sync and args.grad_compression != "none":
        trained.register_comm_hook(None, {"fp16": default_hooks.fp16_compress_hook,
                                          "bf16": default_hooks.bf16_compress_hook}[args.grad_compression])
    if args.compile:
        trained = torch.compile(trained, mode=args.compile, backend=args.compile_backend)
    dataset = load_train_set(args)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                 drop_last=args.drop_last)
    if args.loader == "dali":
        loader = DaliLoader(args, device, rank, world)
    elif cuda:
        loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                            pin_memory=True, persistent_workers=args.workers > 0, drop_last=args.drop_last)
    elif args.data == "image_folder":
        loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                            persistent_workers=args.workers > 0, drop_last=args.drop_last)
    else:
        loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=0, drop_last=args.drop_last)
    if args.data == "image_folder":
        mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
    else:
        mean, std = args.mean, args.std
    opt = torch.optim.SGD(trained.parameters(), lr=args.lr, momentum=args.momentum)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    log_probs = args.model == "net"
    step, epoch, intervals, phases = 0, 0, [], []
    compiled_at_steps, graphs = [], graphs_compiled() if args.compile else 0
    # Seconds per interval in forward (and the loss), backward (with DDP: until its all-reduces are done) and the
    # optimizer step; timed on CPU only (CUDA work is asynchronous).
    phase = [0.0, 0.0, 0.0]
    loss_sum = correct = samples = 0.0
    if cuda:
        loss_sum, correct = torch.zeros((), device=device, dtype=torch.float64), torch.zeros((), device=device)
    interval_start = time.perf_counter()
    while step < args.steps:
        sampler.set_epoch(epoch)
        for batch_index, (xb, yb) in enumerate(loader, start=1):
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            xb = xb.to(torch.float32).div_(255).sub_(mean).div_(std)
            if args.channels_last:
                xb = xb.contiguous(memory_format=memory_format)
            traced = step + 1 == args.trace_step
            if traced:
                profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                profiler.start()
                step_range = torch.profiler.record_function("step")
                step_range.__enter__()
            opt.zero_grad()
            t0 = time.perf_counter()
            with torch.autocast(device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
                out = trained(xb)
            out = out.float()
            loss = F.nll_loss(out, yb) if log_probs else F.cross_entropy(out, yb)
            t1 = time.perf_counter()
            scaler.scale(loss).backward()
            t2 = time.perf_counter()
            scaler.step(opt)
            scaler.update()
            if not cuda:
                t3 = time.perf_counter()
                for i, seconds in enumerate((t1 - t0, t2 - t1, t3 - t2)):
                    phase[i] += seconds
            step += 1
            if args.compile and graphs_compiled() != graphs:
                compiled_at_steps.append(step)
                graphs = graphs_compiled()
            if cuda:  # no synchronisation until the interval ends
                loss_sum += loss.detach() * len(yb)
                correct += out.detach().argmax(1).eq(yb).sum()
            else:
                loss_sum += loss.item() * len(yb)
                correct += out.detach().argmax(1).eq(yb).sum().item()
            samples += len(yb)
            if traced:
                step_range.__exit__(None, None, None)
                profiler.stop()
                profiler.export_chrome_trace(args.trace)
            last = step == args.steps
            if step % args.log_every == 0 or last or batch_index == len(loader):
                if cuda:
                    totals = torch.stack([loss_sum, correct.double(), torch.tensor(samples, dtype=torch.float64,
                                                                                   device=device)])
                    if sync:
                        dist.all_reduce(totals)
                    totals = totals.cpu()  # waits for the interval's work
                    loss_sum, correct = torch.zeros_like(loss_sum), torch.zeros_like(correct)
                else:
                    totals = torch.tensor([loss_sum, correct, samples], dtype=torch.float64)
                    if sync:
                        dist.all_reduce(totals)
                elapsed = time.perf_counter() - interval_start
                intervals.append([step, totals[2].item(), elapsed])
                phases.append(phase)
                phase = [0.0, 0.0, 0.0]
                if rank == 0:
                    print(f"step {step}/{args.steps} loss {totals[0].item() / totals[2].item():.4f} "
                          f"samples/s {totals[2].item() / elapsed:.0f}", flush=True)
                if not cuda:
                    loss_sum = correct = 0.0
                samples = 0.0
                interval_start = time.perf_counter()
            if last:
                break
        epoch += 1
    result = {"rank": rank, "world": world, "sync": sync, "intervals": intervals,
              "phases": {"names": ["forward", "backward", "optimizer"], "intervals": phases}}
    if args.compile:
        result.update(compile=args.compile, compile_backend=args.compile_backend, compiled_at_steps=compiled_at_steps)
    if cuda:
        result["gpu_mem_peak_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        result["gpu_name"] = torch.cuda.get_device_name(device)
    return result


if __name__ == "__main__":
    main()
