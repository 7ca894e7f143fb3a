# Benchmark harness: ddptrain vs a PyTorch DDP reference on the same workload, alternating, medians and ratios.
#
# Run with the project venv's Python (.venv/bin/python: torch 2.11, torchvision 0.26). See bench/README.md.
import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time

import torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import launch  # noqa: E402
import netns  # noqa: E402
import report  # noqa: E402
sys.path.insert(0, os.path.join(BENCH_DIR, "..", "reference"))
from torch_reference import build_model  # noqa: E402

DEFAULT_STEPS = {"net": 300, "resnet18": 40}
DEFAULT_LOG_EVERY = {"net": 20, "resnet18": 5}

# The set RESULTS.md reports; step counts sized for a loaded 2-core machine (the whole set in about 15 minutes).
STANDARD_SUITE = [
    dict(model="net", precision="fp32", world=2, sync="on", data="fashion-mnist", steps=300, log_every=20, reps=3),
    dict(model="resnet18", precision="fp32", world=2, sync="on", data="synthetic", steps=20, log_every=1,
         warmup_steps=2, reps=3),
    dict(model="net", precision="bf16", world=1, sync="on", data="fashion-mnist", steps=100, log_every=10, reps=3),
    dict(model="resnet18", precision="bf16", world=1, sync="on", data="synthetic", steps=4, log_every=1,
         warmup_steps=1, reps=1),
    dict(model="net", precision="fp32", world=2, sync="off", data="fashion-mnist", steps=300, log_every=20, reps=3),
    dict(model="resnet18", precision="fp32", world=2, sync="off", data="synthetic", steps=20, log_every=1,
         warmup_steps=2, reps=3),
    # Where the speed-up comes from: Python given ddptrain's convolution choices (channels_last for Net,
    # padding-only taps skipped for ResNet); what is left is C++ and the trainer around the same kernels.
    dict(model="net", precision="fp32", world=2, sync="on", data="fashion-mnist", steps=300, log_every=20, reps=3,
         python_kernels="ddptrain"),
    dict(model="resnet18", precision="fp32", world=2, sync="on", data="synthetic", steps=20, log_every=1,
         warmup_steps=2, reps=3, python_kernels="ddptrain"),
    # ddptrain's all-reduce over Gloo's TCP, as Python's goes (dist.allreduce = "gloo"; the rows above use
    # ddptrain's default, shared memory between the ranks of one host).
    dict(model="net", precision="fp32", world=2, sync="on", data="fashion-mnist", steps=300, log_every=20, reps=3,
         ddptrain_allreduce="gloo"),
    dict(model="resnet18", precision="fp32", world=2, sync="on", data="synthetic", steps=20, log_every=1,
         warmup_steps=2, reps=3, ddptrain_allreduce="gloo"),
]

# Two nodes over a slow link: the two ranks in two network namespaces joined by a shaped veth pair, with and without
# fp16 gradient compression; the one-host row and the sync-off row (two independent one-rank processes: the
# scaling efficiency's 2 x one-rank samples/s) measured in the same run.
_RESNET18_2_RANKS = dict(model="resnet18", precision="fp32", world=2, data="synthetic", steps=20, log_every=1,
                         warmup_steps=2, reps=3)
# ddptrain's dist.skip_zero_gradients beside each (Python DDP has no such option: its side runs unchanged).
LINK_SUITE = [dict(_RESNET18_2_RANKS, sync="off")] + [
    dict(_RESNET18_2_RANKS, sync="on", link=rate, grad_compression=compression, ddptrain_skip_zero=skip)
    for rate, compression in ((None, "none"), ("1gbit", "none"), ("1gbit", "fp16"), ("10gbit", "none"))
    for skip in (False, True)]
# The one-host sync cost of both models: each with sync on and off, in one run; 5 repetitions, as the goals hinge
# on a few percent and a repetition's noise on this kind of machine is as large.
SYNC_SUITE = [dict(entry, reps=5) for entry in STANDARD_SUITE[:6] if entry["world"] == 2]
# PowerSGD (rank 2) over the link against the same run's one host: the rows of the link suite that carry its goals.
# The start step falls in the warm-up (compressed from step POWERSGD_START_STEP + 1; the first two compressed steps
# allocate the P, Q and error buffers and are not timed). The PowerSGD suite runs ddptrain's products both ways
# (dist.powersgd_products; Python's hook runs as shipped beside each), and the uncompressed 10 Gbit/s row beside them
# (where a fast link may not need compression).
POWERSGD_RANK = 2
POWERSGD_START_STEP = 2
_POWERSGD_ROWS = [dict(_RESNET18_2_RANKS, sync="on", link=rate, grad_compression="powersgd",
                       warmup_steps=POWERSGD_START_STEP + 2) for rate in ("1gbit", "10gbit")]
LINK_SUITE += _POWERSGD_ROWS
POWERSGD_SUITE = [dict(_RESNET18_2_RANKS, sync="on")] + [dict(row, ddptrain_powersgd_products=products)
                                                          for row in _POWERSGD_ROWS
                                                          for products in ("hook", "transposed")] + [
    dict(_RESNET18_2_RANKS, sync="on", link="10gbit")]
# Two nodes of two ranks over a 1 Gbit/s link: ddptrain's all-reduce as Gloo's flat ring of four and as the
# hierarchical one (shared memory in each namespace, one rank per namespace on the link); Python DDP's flat Gloo
# beside each.
HIERARCHICAL_SUITE = [dict(_RESNET18_2_RANKS, world=4, ranks_per_node=2, sync="on", link="1gbit",
                           ddptrain_allreduce=path) for path in ("gloo", "hierarchical")]
SUITES = {"standard": STANDARD_SUITE, "link": LINK_SUITE, "sync": SYNC_SUITE, "powersgd": POWERSGD_SUITE,
          "hierarchical": HIERARCHICAL_SUITE}


def parse_args(argv):
    p = argparse.ArgumentParser(description="ddptrain vs PyTorch DDP (Python) on the same workload")
    p.add_argument("--suite", choices=sorted(SUITES), help="run the preset configurations instead of one")
    p.add_argument("--model", choices=["net", "resnet18"], default="net")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--world", type=int, choices=[1, 2, 4], default=2)
    p.add_argument("--ranks-per-node", type=int, choices=[1, 2], default=1,
                   help="with --link: ranks in each of the two namespaces (world = 2 x this)")
    p.add_argument("--sync", choices=["on", "off"], default="on")
    p.add_argument("--python-kernels", choices=["plain", "ddptrain"], default="plain",
                   help="ddptrain: give the Python side ddptrain's convolution choices (channels_last for net, "
                        "padding-only kernel taps skipped for resnet18)")
    p.add_argument("--ddptrain-allreduce", choices=["auto", "gloo", "shm", "hierarchical"], default="auto",
                   help="ddptrain's dist.allreduce (auto: shared memory between the ranks of one host)")
    p.add_argument("--grad-compression", choices=["none", "fp16", "bf16", "powersgd"], default="none",
                   help="fp16, bf16: gradients all-reduced in float16 or bfloat16 (ddptrain dist.grad_compression, "
                        "Python DDP's fp16_compress_hook or bf16_compress_hook); powersgd: rank-2 PowerSGD from "
                        f"step {POWERSGD_START_STEP} (Python: powerSGD_hook, waited for bucket by bucket, as Gloo "
                        "needs)")
    p.add_argument("--ddptrain-powersgd-products", choices=["hook", "transposed"], default="hook",
                   help="ddptrain's dist.powersgd_products under --grad-compression powersgd")
    p.add_argument("--ddptrain-skip-zero", action="store_true",
                   help="ddptrain's dist.skip_zero_gradients: all-reduce only the gradient elements not zero on "
                        "every rank")
    p.add_argument("--link", help="run the two ranks in two network namespaces joined by a veth pair shaped to "
                                  "this rate (e.g. 1gbit, 10gbit; needs root); ddptrain's all-reduce goes over Gloo")
    p.add_argument("--link-delay-ms", type=float, default=0.2,
                   help="delay each way on --link (tc netem; left out, and said so, where the kernel lacks it)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: each rank on cuda:LOCAL_RANK modulo the GPUs visible; where there are fewer GPUs "
                        "than ranks they share them over Gloo with CUDA tensors on both sides (NCCL refuses two "
                        "ranks on one GPU), else NCCL")
    p.add_argument("--data", choices=["fashion-mnist", "synthetic", "image_folder"], default="fashion-mnist")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist",
                   help="image_folder: a folder with train/ and val/ (bench/data_bench.py makes one)")
    p.add_argument("--image-size", type=int, default=112,
                   help="image_folder: RandomResizedCrop's size on both sides (3-channel images)")
    p.add_argument("--data-workers", type=int, default=1,
                   help="image_folder: decode workers per rank on both sides (ddptrain data.workers threads, "
                        "DataLoader(num_workers=N) processes)")
    p.add_argument("--steps", type=int, help="optimizer steps per run (default net 300, resnet18 40)")
    p.add_argument("--log-every", type=int, help="steps per timed interval (default net 20, resnet18 5)")
    p.add_argument("--warmup-steps", type=int, help="intervals ending at or before this step are not timed "
                   "(default: the first interval)")
    p.add_argument("--reps", type=int, help="repetitions per side (default 3; with --suite: the preset's)")
    p.add_argument("--threads", type=int, help="intra-op threads per rank (default nproc / world)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--synthetic-size", type=int, default=6000)
    p.add_argument("--ddptrain-workers", type=int, default=0,
                   help="ddptrain data.workers (default 0: batches assembled on the training thread, "
                        "as the Python side's DataLoader(num_workers=0))")
    p.add_argument("--ddptrain", default=os.path.join(REPO, "build", "ddptrain"))
    p.add_argument("--no-startup-probe", action="store_true", help="skip the time-to-first-step runs")
    p.add_argument("--results", help="write the block into this file (default: bench/results/SUITE/DATE.md, listed "
                                     "in RESULTS.md)")
    p.add_argument("--no-results", action="store_true", help="print only; write no results file")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per launched run")
    p.add_argument("--work-dir", help="keep run outputs here (default: a temporary folder, removed)")
    return p.parse_args(argv)


def configs_from(args):
    keys = ("model", "precision", "world", "sync", "data", "steps", "log_every", "warmup_steps", "reps",
            "python_kernels", "ddptrain_allreduce", "grad_compression", "link", "ddptrain_skip_zero", "device",
            "ranks_per_node", "ddptrain_powersgd_products")
    entries = SUITES[args.suite] if args.suite else [{k: getattr(args, k) for k in keys}]
    configs = []
    for entry in entries:
        c = dict(entry)
        c["steps"] = c.get("steps") or DEFAULT_STEPS[c["model"]]
        c["log_every"] = c.get("log_every") or DEFAULT_LOG_EVERY[c["model"]]
        c["warmup_steps"] = c.get("warmup_steps") or c["log_every"]
        c["python_kernels"] = c.get("python_kernels") or "plain"
        c["ddptrain_allreduce"] = c.get("ddptrain_allreduce") or "auto"
        c["grad_compression"] = c.get("grad_compression") or "none"
        c["ddptrain_skip_zero"] = bool(c.get("ddptrain_skip_zero"))
        c["ddptrain_powersgd_products"] = c.get("ddptrain_powersgd_products") or "hook"
        c["link"] = c.get("link")
        c["ranks_per_node"] = c.get("ranks_per_node") or 1
        if c["link"]:
            netns.rate_bits_per_s(c["link"])  # a bad rate fails here, before any run
            if c["world"] != 2 * c["ranks_per_node"] or c["sync"] != "on":
                raise SystemExit("--link needs --world 2 x --ranks-per-node and --sync on (the ranks split between "
                                 "the two namespaces)")
            # Shared memory between the namespaces would bypass the link (they share this machine's memory): Gloo,
            # or the hierarchical all-reduce (shared memory within a namespace only).
            if c["ddptrain_allreduce"] == "shm":
                raise SystemExit("--link runs ddptrain's all-reduce over Gloo (shared memory would bypass the link)")
            if c["ddptrain_allreduce"] != "hierarchical":
                c["ddptrain_allreduce"] = "gloo"
        elif c["ranks_per_node"] != 1:
            raise SystemExit("--ranks-per-node needs --link")
        c["link_delay_ms"] = args.link_delay_ms
        c["device"] = c.get("device") or "cpu"
        c["backend"] = "gloo"
        if c["device"] == "cuda":
            if not torch.cuda.is_available():
                raise SystemExit("--device cuda: torch sees no GPU")
            c["backend"] = "nccl" if torch.cuda.device_count() >= c["world"] else "gloo"
        c["reps"] = args.reps or c.get("reps") or 3
        c["threads"] = args.threads or max(1, (os.cpu_count() or 2) // c["world"])
        for k in ("batch", "lr", "momentum", "dropout", "seed", "synthetic_size", "data_dir", "ddptrain_workers",
                  "image_size", "data_workers"):
            c[k] = getattr(args, k)
        if c["data"] == "image_folder":
            if c["model"] == "net":
                raise SystemExit("--data image_folder trains a ResNet (3-channel images)")
            c["in_channels"] = 3
            c["num_classes"] = len([d for d in os.listdir(os.path.join(c["data_dir"], "train"))
                                    if os.path.isdir(os.path.join(c["data_dir"], "train", d))])
            c["ddptrain_workers"] = c["data_workers"]
        else:
            c["in_channels"], c["num_classes"] = 1, 10
        if c["warmup_steps"] >= c["steps"]:
            raise SystemExit(f"warm-up ({c['warmup_steps']} steps) leaves no timed interval of {c['steps']} steps")
        configs.append(c)
    return configs


def label_of(c):
    data = (f"image_folder {c['data_dir']} at {c['image_size']} px, {c['data_workers']} decode worker(s)/rank"
            if c["data"] == "image_folder" else c["data"])
    return (f"{c['model']} {c['precision']}, world {c['world']}, sync {c['sync']}, {data}, "
            + (f"cuda ({c['backend']}), " if c["device"] == "cuda" else "") +
            f"{c['steps']} steps (timed after step {c['warmup_steps']}, interval {c['log_every']}), "
            f"{c['threads']} thread(s)/rank"
            + (", Python with ddptrain's convolution choices" if c["python_kernels"] == "ddptrain" else "")
            + (f", PowerSGD rank {POWERSGD_RANK} from step {POWERSGD_START_STEP} (Python: powerSGD_hook, waited "
               "for bucket by bucket)" if c["grad_compression"] == "powersgd"
               else f", {c['grad_compression']} gradient compression" if c["grad_compression"] != "none" else "")
            + (", ddptrain transposed products" if c["grad_compression"] == "powersgd"
               and c["ddptrain_powersgd_products"] == "transposed" else "")
            + (", ddptrain skip_zero_gradients" if c["ddptrain_skip_zero"] else "")
            + (f", two network namespaces of {c['ranks_per_node']} rank(s) over a {c['link']} link, ddptrain "
               f"all-reduce {c['ddptrain_allreduce']}" if c["link"] and c["ranks_per_node"] > 1
               else f", two network namespaces over a {c['link']} link" if c["link"]
               else f", ddptrain all-reduce {c['ddptrain_allreduce']}" if c["ddptrain_allreduce"] != "auto" else ""))


def write_init(c, path):
    torch.manual_seed(c["seed"])
    model = build_model(c["model"], c["dropout"], c.get("in_channels", 1), c.get("num_classes", 10))
    torch.save(dict(model.state_dict()), path)


def ddptrain_toml(c, init_path):
    data_dir = f'dir = "{c["data_dir"]}"\n' if c["data"] != "synthetic" else ""
    if c["data"] == "image_folder":
        data_dir += f'image_size = {c["image_size"]}\n'
    # Only keys away from their defaults, so that a ddptrain from before they existed still reads the rest.
    dist_extra = (f'grad_compression = "{c["grad_compression"]}"\n' if c["grad_compression"] != "none" else "") + (
        "skip_zero_gradients = true\n" if c["ddptrain_skip_zero"] else "") + (
        f"powersgd_rank = {POWERSGD_RANK}\npowersgd_start_step = {POWERSGD_START_STEP}\n"
        if c["grad_compression"] == "powersgd" else "") + (
        'powersgd_products = "transposed"\n' if c["grad_compression"] == "powersgd"
        and c["ddptrain_powersgd_products"] == "transposed" else "")
    return f"""[job]
out_dir = "out"
seed = {c['seed']}
threads = {c['threads']}

[data]
dataset = "{c['data']}"
{data_dir}batch_size = {c['batch']}
eval_batch_size = {c['batch']}
workers = {c['ddptrain_workers']}
synthetic_train_size = {c['synthetic_size']}
synthetic_test_size = {c['batch']}

[model]
name = "{c['model']}"
dropout = {c['dropout']}
init_from = "{init_path}"

[optimizer]
name = "sgd"
lr = {c['lr']}
momentum = {c['momentum']}

[training]
max_steps = {c['steps']}
epochs = 100000
eval_every_epochs = 0

[amp]
enabled = {'true' if c['precision'] == 'bf16' else 'false'}
dtype = "bf16"

[checkpoint]
resume = "never"

[dist]
device = "{c['device']}"
backend = "{c['backend']}"
allreduce = "{c['ddptrain_allreduce']}"
{dist_extra}
[metrics]
log_every_steps = {c['log_every']}
progress = "plain"
"""


def on_link(link, argvs, envs, per_node=1):
    """Ranks split between the namespaces, `per_node` in each (numbered node by node, as torchrun numbers them), the
    rendezvous at rank 0's address, Gloo on the link's interface."""
    if link is None:
        return argvs, envs
    for rank, env in enumerate(envs):
        env.update(MASTER_ADDR=link.master_addr(), GLOO_SOCKET_IFNAME=netns.IFNAME, LOCAL_RANK=str(rank % per_node),
                   LOCAL_WORLD_SIZE=str(per_node), GROUP_RANK=str(rank // per_node))
    return [link.wrap(rank // per_node, argv) for rank, argv in enumerate(argvs)], envs


def ddptrain_launch(c, args, toml_path, run_dir, probe, link=None):
    extra = ["--training.max_steps=1", "--metrics.log_every_steps=1"] if probe else []
    argvs, envs, port = [], [], launch.free_port()
    for rank in range(c["world"]):
        out = os.path.join(run_dir, "out" if c["sync"] == "on" else f"out.rank{rank}")
        argvs.append([args.ddptrain, toml_path, f"--job.out_dir={out}"] + extra)
        # sync off: ddptrain has no switch for it, so each rank runs as an independent world of one.
        envs.append(launch.rank_env(c["threads"], rank, c["world"], port) if c["sync"] == "on"
                    else launch.rank_env(c["threads"]))
    return on_link(link, argvs, envs, c["ranks_per_node"])


def python_launch(c, init_path, run_dir, probe, link=None):
    argvs, envs, port = [], [], launch.free_port()
    for rank in range(c["world"]):
        argvs.append([sys.executable, os.path.join(BENCH_DIR, "torch_worker.py"), "--model", c["model"],
                      "--grad-compression", c["grad_compression"],
                      "--data", c["data"], "--data-dir", c["data_dir"], "--init", init_path,
                      "--precision", c["precision"], "--sync", c["sync"],
                      "--steps", "1" if probe else str(c["steps"]),
                      "--log-every", "1" if probe else str(c["log_every"]),
                      "--batch", str(c["batch"]), "--threads", str(c["threads"]), "--lr", str(c["lr"]),
                      "--momentum", str(c["momentum"]), "--dropout", str(c["dropout"]), "--seed", str(c["seed"]),
                      "--synthetic-size", str(c["synthetic_size"]), "--kernels", c["python_kernels"],
                      "--in-channels", str(c.get("in_channels", 1)), "--num-classes", str(c.get("num_classes", 10)),
                      "--image-size", str(c["image_size"] if c["data"] == "image_folder" else 28),
                      "--workers", str(c.get("data_workers", 0)),
                      "--device", c["device"], "--backend", c["backend"],
                      "--result", os.path.join(run_dir, f"result.rank{rank}.json")])
        if c["grad_compression"] == "powersgd":
            argvs[-1] += ["--powersgd-rank", str(POWERSGD_RANK), "--powersgd-start-step", str(POWERSGD_START_STEP)]
        envs.append(launch.rank_env(c["threads"], rank, c["world"], port))
    return on_link(link, argvs, envs, c["ranks_per_node"])


def timed_rate(intervals, warmup_steps):
    """intervals: [step at interval end, samples, seconds]. Samples/s over the intervals after the warm-up."""
    timed = [(n, s) for step, n, s in intervals if step > warmup_steps]
    if not timed:
        raise launch.RunError(f"no timed interval after step {warmup_steps}: {intervals}")
    return sum(n for n, _ in timed) / sum(s for _, s in timed)


def interval_steps(intervals):
    """The optimizer steps each interval ([step at its end, ...]) holds."""
    ends = [step for step, _, _ in intervals]
    return [end - start for start, end in zip([0] + ends, ends)]


def timed_phases(intervals, phases, warmup_steps):
    """phases: {name: [seconds per interval]}, parallel to intervals. Seconds per step after the warm-up."""
    steps = interval_steps(intervals)
    timed = [i for i, (step, _, _) in enumerate(intervals) if step > warmup_steps]
    counted = sum(steps[i] for i in timed)
    return {name: sum(values[i] for i in timed) / counted for name, values in phases.items()}


# ddptrain's phases (metrics.jsonl time_<phase>_s: seconds per step of an interval, the ranks' mean).
DDPTRAIN_PHASES = ("data", "compute", "comm", "optimizer")


def ddptrain_intervals(path):
    """The train records' [step, samples, seconds] and the seconds of each interval in each phase."""
    with open(path) as f:
        records = [r for r in (json.loads(line) for line in f if line.strip()) if r["kind"] == "train"]
    intervals = [[r["step"], r["samples"], r["samples"] / r["samples_per_s"]] for r in records]
    steps = interval_steps(intervals)
    return intervals, {name: [r[f"time_{name}_s"] * n for r, n in zip(records, steps)] for name in DDPTRAIN_PHASES}


def python_intervals(path):
    with open(path) as f:
        result = json.load(f)
    names, per_interval = result["phases"]["names"], result["phases"]["intervals"]
    return result["intervals"], {name: [p[i] for p in per_interval] for i, name in enumerate(names)}


def side_rate(side, c, run_dir):
    """Samples/s of the whole job: rank 0's all-reduced intervals (sync on), the sum over processes (sync off);
    and seconds per step in each phase (rank 0's; sync off: the processes' mean)."""
    ranks = range(c["world"]) if c["sync"] == "off" else [0]
    rates, phases = [], []
    for rank in ranks:
        if side == "ddptrain":
            out = "out" if c["sync"] == "on" else f"out.rank{rank}"
            intervals, times = ddptrain_intervals(os.path.join(run_dir, out, "metrics.jsonl"))
        else:
            intervals, times = python_intervals(os.path.join(run_dir, f"result.rank{rank}.json"))
        rates.append(timed_rate(intervals, c["warmup_steps"]))
        phases.append(timed_phases(intervals, times, c["warmup_steps"]))
    return sum(rates), {name: sum(p[name] for p in phases) / len(phases) for name in phases[0]}


def run_side(side, c, args, work, rep, commands, link):
    init_path = os.path.join(work, "init.pt")
    toml_path = os.path.join(work, "ddptrain.toml")
    results = {}
    probes = [False] if (args.no_startup_probe or c["log_every"] == 1) else [False, True]
    for probe in probes:
        run_dir = os.path.join(work, f"{side}.rep{rep}" + (".probe" if probe else ""))
        os.makedirs(run_dir)
        argvs, envs = (ddptrain_launch(c, args, toml_path, run_dir, probe, link) if side == "ddptrain"
                       else python_launch(c, init_path, run_dir, probe, link))
        commands.setdefault((side, probe), command_text(argvs[0], envs[0]))
        r = launch.run_ranks(argvs, envs, run_dir, args.timeout, stop_after_first_step=probe)
        if probe:
            results["first_step"] = r["first_step_s"]
        else:
            results["rate"], results["phases"] = side_rate(side, c, run_dir)
            results["rss"] = r["rss_mib"]
            results["first_step"] = r["first_step_s"] if c["log_every"] == 1 else None
    return results


def command_text(argv, env):
    keys = [k for k in launch.DIST_VARS + ("OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME") if k in env]
    return " ".join(f"{k}={env[k]}" for k in keys) + " " + " ".join(shlex.quote(a) for a in argv)


def repetition_order(configs):
    """(repetition, configuration index) in the order they run: repetition by repetition across the configurations,
    so that a ratio of two of them (sync on / off) compares runs made minutes apart rather than a whole
    configuration's runs apart, and repetition k of one can be paired with repetition k of the other."""
    return [(rep, i) for rep in range(max(c["reps"] for c in configs)) for i, c in enumerate(configs)
            if rep < c["reps"]]


def prepare_config(c, work_root, index):
    """The configuration's folder (initial weights, ddptrain.toml) and the lists its repetitions fill."""
    work = os.path.join(work_root, f"config{index}")
    os.makedirs(work)
    write_init(c, os.path.join(work, "init.pt"))
    with open(os.path.join(work, "ddptrain.toml"), "w") as f:
        f.write(ddptrain_toml(c, os.path.join(work, "init.pt")))
    return dict(c=c, label=label_of(c), work=work, commands={}, link_rates=[],
                results={side: {"rates": [], "first_step": [], "rss": [], "phases": []}
                         for side in ("ddptrain", "python")})


def run_config_rep(p, args, rep):
    """One repetition of both sides. Over a link, the link is built for it (its rate measured) and removed after;
    the floor takes the median of the repetitions' rates."""
    c = p["c"]
    with contextlib.ExitStack() as stack:
        link = stack.enter_context(netns.ShapedLink(c["link"], c["link_delay_ms"])) if c["link"] else None
        if link:
            p["link_rates"].append(link.measured_bytes_per_s)
            print(f"  link: {link.description()}", flush=True)
        run_rep(c, args, p["work"], rep, p["commands"], link, p["results"])
    if link:
        c["link_bytes_per_s"] = report.median(p["link_rates"])
        c["link_description"] = link.description(p["link_rates"])


def run_rep(c, args, work, rep, commands, link, results):
    order = ("ddptrain", "python") if rep % 2 == 0 else ("python", "ddptrain")
    for side in order:
        r = run_side(side, c, args, work, rep, commands, link)
        for key, name in (("rates", "rate"), ("first_step", "first_step"), ("rss", "rss"), ("phases", "phases")):
            results[side][key].append(r[name])
        print(f"  rep {rep + 1}/{c['reps']} {side:8s}: {r['rate']:8.1f} samples/s, first step "
              f"{report.fmt(r['first_step'], '.2f')} s, peak RSS/rank "
              f"{' / '.join(report.fmt(x) for x in r['rss'])} MiB; ms/step "
              + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r["phases"].items()), flush=True)


def copy_bandwidth():
    """Bytes per second one thread copies (torch copy_ of 256 MiB of float32 into another tensor, best of 5)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    src = torch.ones(64 << 20)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    torch.set_num_threads(threads)
    return src.numel() * src.element_size() / best


def powersgd_elements(model):
    """Elements PowerSGD all-reduces per step (powerSGD_hook, torch 2.11): vectors whole; a matrix of n rows and m
    columns (a tensor's first dimension, the rest flattened) as P (n x r) and Q (m x r) when _should_compress says
    (n + m) r * min_compression_rate < n m, else whole."""
    total = 0
    for p in model.parameters():
        n = p.shape[0] if p.dim() > 1 else 0
        m = p.numel() // n if n else 0
        r = min(n, m, POWERSGD_RANK)
        total += (n + m) * r if n and (n + m) * r * 2.0 < n * m else p.numel()
    return total


def sync_floor(c, copy_bytes_per_s):
    """(seconds, how) the gradient all-reduce of one step cannot beat: over a link, the bytes each rank must send
    (2 (n - 1) / n of the gradients, halved by fp16 or bf16 compression) at the measured link rate; on one host, one copy of
    the gradients at this machine's copy bandwidth."""
    model = build_model(c["model"], c["dropout"])
    params = sum(p.numel() for p in model.parameters())
    if c["grad_compression"] == "powersgd":
        wire = 4 * powersgd_elements(model)
        params = wire // 4
    else:
        wire = params * (4 if c["grad_compression"] == "none" else 2)
    if c["link"]:
        sent = wire * 2 * (c["world"] - 1) / c["world"]
        rate = c["link_bytes_per_s"]
        return sent / rate, (f"{sent / 1e6:.1f} MB sent by each rank ({params / 1e6:.2f} M gradients, "
                             f"{wire // params} bytes each, ring all-reduce 2 (n - 1) / n) at the link's measured "
                             f"{rate * 8 / 1e9:.2f} Gbit/s ({c['link_description']})")
    return wire / copy_bytes_per_s, (f"one copy of the {wire / 1e6:.1f} MB of gradients at this machine's "
                                     f"{copy_bytes_per_s / 1e9:.1f} GB/s (one thread, torch copy_ of 256 MiB)")


def sync_pairs(done, copy_bytes_per_s):
    """Each sync-on configuration with the sync-off one of the same model, data, ranks and Python kernels."""
    def base(c):
        return tuple(c[k] for k in ("model", "precision", "world", "data", "python_kernels", "threads", "batch"))
    off = {base(c): results for c, _, results in done if c["sync"] == "off"}
    pairs = []
    for c, label, results in done:
        if c["sync"] == "on" and c["world"] > 1 and base(c) in off:
            floor_s, floor_what = sync_floor(c, copy_bytes_per_s)
            pairs.append(dict(label=label, global_batch=c["world"] * c["batch"], on=results, off=off[base(c)],
                              floor_s=floor_s, floor_what=floor_what))
    return pairs


def freeze_binary(path, work_root):
    """Copies ddptrain (under the shared build lock, so not mid-link) so that a rebuild during the run cannot
    change or break the binary being measured. Returns the copy's path and its sha256 prefix."""
    frozen = os.path.join(work_root, "ddptrain")
    with open("/tmp/ddp-build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.copy2(path, frozen)
    with open(frozen, "rb") as f:
        return frozen, hashlib.sha256(f.read()).hexdigest()[:12]


def result_key_args(argv):
    """The arguments that pick what is measured (output locations left out): the key of the RESULTS.md block."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--work-dir", "--results"):
            skip = True
        elif not (a.startswith("--work-dir=") or a.startswith("--results=") or a == "--no-results"):
            kept.append(a)
    return kept


def main(argv):
    args = parse_args(argv)
    configs = configs_from(args)
    if not os.access(args.ddptrain, os.X_OK):
        raise SystemExit(f"{args.ddptrain} is not built (cmake --build build)")
    machine = report.machine_description(REPO)
    load_start, date = report.load_average(), report.now_utc()
    work_root = args.work_dir or tempfile.mkdtemp(prefix="ddp_bench.")
    os.makedirs(work_root, exist_ok=True)
    args.ddptrain, binary_sha = freeze_binary(args.ddptrain, work_root)
    body, rows, done, command_lines = [], [], [], []
    prepared = [prepare_config(c, work_root, i) for i, c in enumerate(configs)]
    for rep, i in repetition_order(configs):
        print(f"[{i + 1}/{len(configs)}] {prepared[i]['label']}", flush=True)
        run_config_rep(prepared[i], args, rep)
    for p in prepared:
        c, label, results, commands = p["c"], p["label"], p["results"], p["commands"]
        with open(os.path.join(p["work"], "ddptrain.toml")) as f:
            toml_text = f.read()
        lines, row = report.config_table(label, results)
        body += lines + ([f"Link: {c['link_description']}.", ""] if c["link"] else [])
        rows.append((label, row))
        done.append((c, label, results))
        command_lines += [f"- {label}:", "  ```sh"] + [f"  {cmd}" for _, cmd in sorted(commands.items())]
        command_lines += ["  ```", "  ddptrain.toml:", "  ```toml"] + ["  " + l for l in toml_text.splitlines()]
        command_lines += ["  ```"]
    load_end = report.load_average()
    python = os.path.relpath(sys.executable, REPO)  # .venv/bin/python, or where it lies outside the checkout
    python = sys.executable if python.startswith("..") else python
    invocation = f"{python} bench/ddp_bench.py " + " ".join(shlex.quote(a) for a in argv)
    block = "\n".join(
        [f"## `{invocation.strip()}`", "",
         f"Run {date}. Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']} RAM, "
         f"Linux {machine['kernel']}; GPUs: {machine['gpus']}; "
         f"torch {machine['torch']} / torchvision {machine['torchvision']} "
         f"(Python {machine['python']}); ddptrain binary sha256 {binary_sha}..., built from the working tree at "
         f"commit {machine['ddptrain_commit']}. "
         f"Load average (1/5/15 min) at start {load_start}, at end {load_end}.", "",
         "**Noise:** other work may share the machine while the benchmark runs (the load averages above say how much); "
         "the numbers are noisy (compare the per-repetition values) and only the two sides' ratio, measured "
         "alternately in the same window, is meaningful.", ""]
        + report.summary_table(rows) + report.sync_cost_lines(sync_pairs(done, copy_bandwidth())) + body
        + ["<details><summary>Exact commands (rank 0; other ranks differ only in RANK/LOCAL_RANK and output "
           "paths; ddptrain is a copy of build/ddptrain taken at the start; the startup probe adds the step-1 "
           "overrides)</summary>", ""] + command_lines + ["", "</details>"])
    print()
    print(block)
    if not args.no_results:
        written = report.keep_run("ddp_bench " + " ".join(result_key_args(argv)), block, args.results)
        print(f"\n(updated {written})")
    if not args.work_dir:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
