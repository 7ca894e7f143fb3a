# Helpers of scripts/gpu-check, run with the Python that has torch (the GPU machine's /opt/torch/.venv/bin/python3):
#   metrics METRICS.jsonl   final evaluation and training figures of a ddptrain run, as key=value lines
#   max-diff A.pt B.pt      the largest absolute difference over every tensor of two state dicts
#   equal A.pt B.pt         exit 0 when every tensor is torch.equal (same names), else 1; one line either way
#   versions                torch, CUDA, cuDNN, NCCL and GPU as this Python's torch sees them
#   nccl-two-ranks          two processes on cuda:0 try one NCCL all_reduce: does NCCL refuse a shared GPU?
import json
import os
import socket
import sys

import torch


def load(path):
    state = torch.load(path, map_location="cpu")
    if not isinstance(state, dict):
        raise SystemExit(f"{path}: not a state dict ({type(state).__name__})")
    return state


def same_names(a, b, pa, pb):
    if a.keys() != b.keys():
        only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
        print(f"different tensors: only in {pa}: {only_a[:5]}, only in {pb}: {only_b[:5]}")
        sys.exit(1)


def max_diff(pa, pb):
    a, b = load(pa), load(pb)
    same_names(a, b, pa, pb)
    worst = 0.0
    for k in a:
        if a[k].shape != b[k].shape:
            print(f"{k}: shape {tuple(a[k].shape)} vs {tuple(b[k].shape)}")
            sys.exit(1)
        if a[k].numel():
            worst = max(worst, (a[k].double() - b[k].double()).abs().max().item())
    print(f"{worst:.3g}")


def equal(pa, pb):
    a, b = load(pa), load(pb)
    same_names(a, b, pa, pb)
    differ = [k for k in a if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or not torch.equal(a[k], b[k])]
    if differ:
        worst = max(((a[k].double() - b[k].double()).abs().max().item() if a[k].shape == b[k].shape else float("inf"))
                    for k in differ)
        print(f"{len(differ)} of {len(a)} tensors differ (e.g. {', '.join(differ[:3])}; max abs diff {worst:.3g})")
        sys.exit(1)
    print(f"all {len(a)} tensors equal (torch.equal)")


def metrics(path):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    if evals:
        e = evals[-1]
        print(f"final_accuracy={e['accuracy']:.4f}")
        print(f"final_eval=step {e['step']}: {e.get('correct')}/{e.get('total')} correct, loss {e['loss']:.4f}")
    else:
        print("final_accuracy=")
    if train:
        timed = train[1:] or train
        samples, seconds = sum(r["samples"] for r in timed), sum(r["samples"] / r["samples_per_s"] for r in timed)
        print(f"train_steps={train[-1]['step']}")
        print(f"samples_per_s={samples / seconds:.0f} (training intervals after the first)")
        peaks = [r["gpu_mem_peak_mib"] for r in train if r.get("gpu_mem_peak_mib") is not None]
        print(f"gpu_mem_peak_mib={max(peaks):.0f}" if peaks else "gpu_mem_peak_mib=n/a (not in metrics.jsonl)")
        print(f"loss_scale={train[-1].get('loss_scale')} skipped_steps={train[-1].get('skipped_steps')}")


def versions():
    import torchvision

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "n/a (no GPU)"
    print(f"Python {sys.version.split()[0]} at {sys.executable}")
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}; CUDA {torch.version.cuda}, "
          f"cuDNN {cudnn}, NCCL {nccl}")
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print(f"torch sees {torch.cuda.device_count()} GPU(s): {p.name}, {p.total_memory / 2**30:.1f} GiB, "
              f"compute capability {p.major}.{p.minor}, {p.multi_processor_count} SMs")


def _nccl_rank(rank, port):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=device)
    t = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print(f"rank {rank}: all_reduce on cuda:0 gave {t.tolist()}", flush=True)
    dist.destroy_process_group()


def nccl_two_ranks():
    import torch.multiprocessing as mp

    if not torch.cuda.is_available():
        raise SystemExit("no GPU visible")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        mp.spawn(_nccl_rank, args=(port,), nprocs=2, join=True)
    except Exception as e:  # the child's exception, re-raised by spawn with its traceback
        lines = [line for line in str(e).splitlines() if line.strip()]
        print("\n".join(lines[-6:]))
        reason = next((line for line in lines if "Duplicate GPU" in line or "ncclInvalidUsage" in line), lines[-1])
        print(f"NCCL refused 2 ranks on one GPU: {reason.strip()}")
        sys.exit(1)
    print("NCCL ran 2 ranks on one GPU (all_reduce 1 + 2 = 3 on both)")


def main(argv):
    commands = {"metrics": (metrics, 1), "max-diff": (max_diff, 2), "equal": (equal, 2), "versions": (versions, 0),
                "nccl-two-ranks": (nccl_two_ranks, 0)}
    if not argv or argv[0] not in commands or len(argv) - 1 != commands[argv[0]][1]:
        raise SystemExit(__doc__ or "usage: gpu_check.py metrics|max-diff|equal|versions|nccl-two-ranks ARGS")
    fn, _ = commands[argv[0]]
    fn(*argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
