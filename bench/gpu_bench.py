# GPU benchmark: ddptrain against Python PyTorch training loops on the same GPU and the same torch, four sides.
#
#   ddptrain eager    ddptrain with optimizer.fused = true (torch.optim's fused=True: one fused SGD kernel)
#   ddptrain graph    the same config with training.cuda_graph = true: after a warm-up the whole step (forward,
#                     backward, loss scaling, fused SGD) is captured as one CUDA graph and replayed (needs a CUDA
#                     device: skipped, its cells n/a, on --device cpu or with a ddptrain that does not know the key)
#   Python eager      torch_worker.py: the model, torch.amp.GradScaler and torch.optim.SGD as a user writes them
#   Python compiled   torch_worker.py --compile MODE: torch.compile(model, mode=MODE), the usual user recipe; on CUDA
#                     mode="max-autotune" (Inductor autotunes its kernels and runs the compiled graphs as CUDA graphs,
#                     torch.compile's documented modes); the loss, GradScaler and optimizer step stay eager
#
# All sides train the same model from the same initial weights with the same batches (full ones only: drop_last, so
# that both graph sides see one input shape), optimizer (SGD with momentum; Python's is torch.optim.SGD with its
# defaults, foreach on CUDA, in both Python sides), precision (AMP fp16 with loss scaling: ddptrain's
# amp.loss_scaling auto, Python's torch.amp.GradScaler), memory format (channels_last) and cudnn.benchmark. The sides
# run in turn, in reversed order every other repetition, over --reps repetitions. Measured: training samples/s after a
# warm-up (ddptrain's metrics.jsonl intervals; torch_worker.py times the same intervals), peak GPU memory (the caching
# allocator's peak allocated bytes: ddptrain's gpu_mem_peak_mib, Python's torch.cuda.max_memory_allocated()) and peak
# host RSS (GNU time), each side's median; the ratios are of the medians.
#
# The warm-up (the first warmup_steps steps, whole intervals) is never timed. It covers torch.compile's compilation:
# TorchDynamo and AOTAutograd compile the forward and backward at the first step, max-autotune autotunes there (minutes
# the first time, faster from Inductor's on-disk caches), each Triton kernel tunes its launch configuration at its
# first launch, and the CUDA graph trees record each graph at one of its first calls: all within the first few steps,
# well inside the 30 and 60 warm-up steps, so the compiled side needs no longer warm-up. torch_worker.py reports the
# steps at which graphs were compiled and the report says where they fell; a compilation after the warm-up is named
# there (its repetition's rate would include it). Its runs get --compile-timeout instead of --timeout.
#
# Goals (on CUDA): ResNet-18 Fashion-MNIST fp16: ddptrain eager >= 1.1x Python eager, ddptrain graph >= 3x Python eager
# and >= 1.0x Python compiled (samples/s); ResNet-50 synthetic fp16: ddptrain graph >= 1.3x Python eager and >= 1.0x
# Python compiled, ddptrain's peak GPU memory and peak host RSS <= 1.0x Python eager's (each ddptrain side its own
# line). Each is met, not met, or n/a when a side it needs did not run. The smoke states the ResNet-18 goals for its
# tiny CPU run (a check of the goal plumbing, not of speed); there ddptrain graph is n/a (no CUDA) and Python compiled
# runs torch.compile with backend="eager" (TorchDynamo's capture, no compiler: Inductor's C++ compilation of ResNet-18
# takes minutes on two cores), so the smoke checks the plumbing of all four sides in seconds.
#
#   python3 bench/gpu_bench.py --ddptrain build-gpu/ddptrain           # ResNet-50 synthetic 224 + ResNet-18 F-MNIST
#   python3 bench/gpu_bench.py --sides ddptrain_graph,python_compiled  # a subset of the four sides
#   .venv/bin/python bench/gpu_bench.py --device cpu --smoke           # plumbing check without a GPU
#
# The image-folder configuration (ResNet-50, 224 px, batch 128, fp16, on a folder of generated 500x375 JPEGs on local
# disk, data_bench.py's make_folder) has five sides of its own: ddptrain CPU decode (data.decode = "cpu", data.workers
# = cores - 2), ddptrain GPU decode (data.decode = "gpu": nvJPEG and the transforms on the GPU, 3 loader threads, so
# at most 4 CPU threads with the training thread), Python DataLoader (torch_worker.py, ImageFolder with the v2
# transforms, cores - 2 workers), DALI (torch_worker.py --loader dali: DALI's mixed pipeline with 4 threads, run where
# --dali-python's venv exists, bench/requirements-dali.txt) and ddptrain synthetic (the same model and batch on
# synthetic 224 images: the input pipeline's ceiling). Goals: CPU decode >= 0.9x synthetic and >= 2.5x DataLoader,
# GPU decode >= 0.9x synthetic and >= 1.0x DALI. Its sides need a GPU but for CPU decode, DataLoader and synthetic; the
# smoke runs a tiny image folder on the CPU (those three sides; GPU decode and DALI n/a) to check its plumbing.
#
# A world of one (one GPU): no side makes a process group or a DDP wrapper (ddptrain never does for a world of one;
# torch_worker.py does the same), so the comparison is of the training step, data feeding and startup around it. The
# launching, interval timing and reporting are ddp_bench.py's (launch.py, report.py).
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import launch  # noqa: E402
import report  # noqa: E402
from data_bench import DALI_PYTHON, make_folder  # noqa: E402
from ddp_bench import command_text, ddptrain_intervals, timed_rate  # noqa: E402
sys.path.insert(0, os.path.join(BENCH_DIR, "..", "reference"))
from torch_reference import build_model  # noqa: E402

COMMON = dict(precision="fp16", channels_last=True, cudnn_benchmark=True, lr=0.01, momentum=0.9, seed=0, world=1,
              drop_last=True)

# The sides, in the order of a repetition (every other repetition runs them in reverse), and their names in the report.
SIDES = ("ddptrain_eager", "ddptrain_graph", "python_eager", "python_compiled")
SIDE_NAMES = {"ddptrain_eager": "ddptrain eager", "ddptrain_graph": "ddptrain graph", "python_eager": "Python eager",
              "python_compiled": "Python compiled"}
BASELINE = "python_eager"  # memory and RSS ratios are each side's over this one's
# The image-folder configuration's sides: the eager ddptrain and Python sides with data.decode = "cpu" and DataLoader,
# and three of its own.
IMAGE_SIDES = ("ddptrain_eager", "ddptrain_gpu_decode", "python_eager", "dali", "synthetic")
IMAGE_SIDE_NAMES = {"ddptrain_eager": "ddptrain CPU decode", "ddptrain_gpu_decode": "ddptrain GPU decode",
                    "python_eager": "Python DataLoader", "dali": "DALI mixed", "synthetic": "ddptrain synthetic"}
IMAGE_RATE_RATIOS = (("ddptrain_eager", "synthetic"), ("ddptrain_eager", "python_eager"),
                     ("ddptrain_gpu_decode", "synthetic"), ("ddptrain_gpu_decode", "dali"))
ALL_SIDES = SIDES + tuple(s for s in IMAGE_SIDES if s not in SIDES)
# The ddptrain sides, each with its config's changes from the eager one.
DDPTRAIN_SIDES = {"ddptrain_eager": {}, "ddptrain_graph": {"graph": True}, "ddptrain_gpu_decode": {"decode": "gpu"},
                  "synthetic": {"synthetic": True}}
GPU_DECODE_WORKERS = 3  # data.workers of ddptrain GPU decode (with the training thread: 4 CPU threads per GPU)
DALI_THREADS = 4
# The samples/s ratios reported (the goals' ones).
RATE_RATIOS = (("ddptrain_eager", "python_eager"), ("ddptrain_graph", "python_eager"),
               ("ddptrain_graph", "python_compiled"))
# Keys the graph side needs: training.cuda_graph takes SGD with optimizer.fused = true and no gradient accumulation.
GRAPH_KEYS = ("training.cuda_graph", "optimizer.fused")
METRIC_TEXT = {"rate": ("samples/s", "samples/s"), "gpu_mem_peak_mib": ("peak GPU memory", "MiB"),
               "rss_mib": ("peak host RSS", "MiB")}

# Goals: (metric, side, reference side, ">=" or "<=", bound on side / reference).
RESNET18_GOALS = [("rate", "ddptrain_eager", "python_eager", ">=", 1.1),
                  ("rate", "ddptrain_graph", "python_eager", ">=", 3.0),
                  ("rate", "ddptrain_graph", "python_compiled", ">=", 1.0)]
RESNET50_GOALS = [("rate", "ddptrain_graph", "python_eager", ">=", 1.3),
                  ("rate", "ddptrain_graph", "python_compiled", ">=", 1.0)] + [
    (metric, side, "python_eager", "<=", 1.0) for metric in ("gpu_mem_peak_mib", "rss_mib")
    for side in ("ddptrain_eager", "ddptrain_graph")]
IMAGE_GOALS = [("rate", "ddptrain_eager", "synthetic", ">=", 0.9), ("rate", "ddptrain_eager", "python_eager", ">=", 2.5),
               ("rate", "ddptrain_gpu_decode", "synthetic", ">=", 0.9), ("rate", "ddptrain_gpu_decode", "dali", ">=", 1.0)]
IMAGE_CONFIG = dict(sides=IMAGE_SIDES, side_names=IMAGE_SIDE_NAMES, rate_ratios=IMAGE_RATE_RATIOS, data="image_folder",
                    in_channels=3)

# The GPU set: ResNet-50 on synthetic 3x224x224 images (ImageNet's shape and head), ResNet-18 on Fashion-MNIST, and
# ResNet-50 on a JPEG folder (the image-folder sides), all AMP fp16 and channels_last. Fashion-MNIST's 60000 images leave a partial batch of 96 each
# epoch, dropped (drop_last) on every side.
GPU_SUITE = [
    dict(COMMON, name="resnet50 synthetic 3x224x224", title="ResNet-50 synthetic fp16", model="resnet50",
         data="synthetic", in_channels=3, image_size=224, num_classes=1000, batch=128, steps=100, log_every=10,
         warmup_steps=30, synthetic_size=2048, goals=RESNET50_GOALS),
    dict(COMMON, name="resnet18 fashion-mnist 1x28x28", title="ResNet-18 Fashion-MNIST fp16", model="resnet18",
         data="fashion-mnist", in_channels=1, image_size=28, num_classes=10, batch=256, steps=300, log_every=20,
         warmup_steps=60, synthetic_size=0, goals=RESNET18_GOALS),
    dict(COMMON, **IMAGE_CONFIG, name="resnet50 image folder 224", title="ResNet-50 image folder fp16",
         model="resnet50", image_size=224, num_classes=100, batch=128, steps=100, log_every=10, warmup_steps=30,
         synthetic_size=2048, folder=dict(images=6400, classes=100, width=500, height=375, quality=90),
         goals=IMAGE_GOALS),
]
# --smoke: the same plumbing in seconds (CPU: fp16 autocast and GradScaler("cpu") run there too), with the ResNet-18
# goals stated for it (their verdicts say nothing about a GPU).
SMOKE_SUITE = [
    dict(COMMON, name="smoke resnet18 synthetic 3x16x16", title="smoke ResNet-18 synthetic fp16", model="resnet18",
         data="synthetic", in_channels=3, image_size=16, num_classes=10, batch=4, steps=4, log_every=1,
         warmup_steps=1, synthetic_size=64, goals=RESNET18_GOALS, cudnn_benchmark=False),
    dict(COMMON, **IMAGE_CONFIG, name="smoke resnet18 image folder 16", title="smoke ResNet-18 image folder fp16",
         model="resnet18", image_size=16, num_classes=4, batch=4, steps=4, log_every=1, warmup_steps=1,
         synthetic_size=64, folder=dict(images=48, classes=4, width=64, height=48, quality=90), goals=[],
         cudnn_benchmark=False),
]


def sides_of(c):
    return c.get("sides", SIDES)


def name_of(c, side):
    return c.get("side_names", {}).get(side, SIDE_NAMES.get(side, side))


def side_list(text):
    sides = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in sides if s not in ALL_SIDES]
    if unknown or not sides:
        raise argparse.ArgumentTypeError(f"sides are {', '.join(ALL_SIDES)} (comma-separated), not {text!r}")
    return sides


def parse_args(argv):
    p = argparse.ArgumentParser(description="ddptrain (eager, CUDA graph) vs Python (eager, torch.compile) on one GPU")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--smoke", action="store_true", help="tiny ResNet-18 run, world 1, a few steps (plumbing check)")
    p.add_argument("--only", help="run only the configurations whose name contains this text")
    p.add_argument("--sides", type=side_list, default=list(ALL_SIDES),
                   help=f"the sides to run, comma-separated (default all: {','.join(ALL_SIDES)}); the others are n/a")
    p.add_argument("--reps", type=int, help="repetitions per side (default 3, smoke 1)")
    p.add_argument("--steps", type=int, help="override every configuration's step count")
    p.add_argument("--workers", type=int, default=4, help="batch-assembly workers on every side (ddptrain "
                   "data.workers, Python DataLoader num_workers with --device cuda)")
    p.add_argument("--threads", type=int, help="intra-op CPU threads per rank (default nproc / world)")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--image-root", default=os.path.join(tempfile.gettempdir(), "ddptrain_gpu_bench_images"),
                   help="where the image-folder configuration's JPEG folder is generated (once; local disk)")
    p.add_argument("--dali-python", default=DALI_PYTHON,
                   help="the Python of a venv with NVIDIA DALI (bench/requirements-dali.txt) for the DALI side; its "
                        "packages join this torch's (PYTHONPATH); the side is n/a where it does not exist")
    default_ddptrain = os.path.join(REPO, "build-gpu", "ddptrain")
    if not os.access(default_ddptrain, os.X_OK):
        default_ddptrain = os.path.join(REPO, "build", "ddptrain")
    p.add_argument("--ddptrain", default=default_ddptrain)
    p.add_argument("--timeout", type=float, default=600, help="seconds per launched run")
    p.add_argument("--compile-timeout", type=float, default=1800,
                   help="seconds per Python compiled run (torch.compile's max-autotune compiles for minutes)")
    p.add_argument("--compile-backend", help="Python compiled's torch.compile backend (default inductor; the CPU "
                   "smoke's: eager, TorchDynamo's capture without a compiler)")
    p.add_argument("--work-dir", help="keep every run's outputs here (default: a temporary folder, removed)")
    p.add_argument("--json", help="write all figures here")
    p.add_argument("--markdown", help="write the report section (for bench/GPU.md) here")
    p.add_argument("--goals", help="write 'goal<TAB>figure<TAB>met|not met|n/a' lines here")
    return p.parse_args(argv)


def configs_from(args):
    configs = []
    for entry in (SMOKE_SUITE if args.smoke else GPU_SUITE):
        if args.only and args.only not in entry["name"]:
            continue
        c = dict(entry, device=args.device, workers=args.workers, data_dir=args.data_dir)
        if args.steps:
            c["steps"] = args.steps
            c["warmup_steps"] = min(c["warmup_steps"], max(0, args.steps - c["log_every"]))
        c["reps"] = args.reps or (1 if args.smoke else 3)
        c["threads"] = args.threads or max(1, (os.cpu_count() or 2) // c["world"])
        # torch.compile's mode: max-autotune on CUDA (CUDA graphs through Inductor), the default one on CPU. Its
        # backend: Inductor, but for the CPU smoke TorchDynamo's capture alone (backend "eager"): Inductor's C++
        # compilation of ResNet-18's forward and backward takes minutes on two cores.
        c["compile_mode"] = "max-autotune" if c["device"] == "cuda" else "default"
        c["compile_backend"] = args.compile_backend or ("eager" if args.smoke and c["device"] == "cpu" else "inductor")
        if c["device"] == "cpu":
            c["cudnn_benchmark"] = False
            if not args.smoke:
                c["goals"] = []  # the GPU set's goals are about a GPU
        if "folder" in c:  # cores - 2 loader threads or workers for the CPU decoders, a folder of its own
            c["workers"] = max(1, (os.cpu_count() or 2) - 2)
            f = c["folder"]
            c["data_dir"] = os.path.join(args.image_root, f"{f['images']}x{f['width']}x{f['height']}q{f['quality']}")
        configs.append(c)
    if not configs:
        raise SystemExit(f"no configuration matches --only {args.only!r}")
    return configs


def ddptrain_capabilities(ddptrain):
    """The config keys this ddptrain knows ('section.key') and the spelling it takes for float16 AMP."""
    quickstart = os.path.join(REPO, "configs", "quickstart.toml")
    out = subprocess.run([ddptrain, quickstart, "--print-config"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"{ddptrain} --print-config failed:\n{out.stdout}{out.stderr}")
    keys, section = set(), ""
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif "=" in line:
            keys.add(section + "." + line.split("=", 1)[0].strip())
    probe = subprocess.run([ddptrain, quickstart, "--amp.dtype=float16", "--print-config"], capture_output=True,
                           text=True, timeout=60)
    return keys, ("float16" if probe.returncode == 0 else "fp16")


def side_plan(c, sides, keys, dali_python):
    """side -> None where it runs, else why not (its cells are n/a)."""
    plan = {}
    for side in sides_of(c):
        unknown = [k for k in GRAPH_KEYS if k not in keys]
        if side not in sides:
            plan[side] = "not selected (--sides)"
        elif side in ("ddptrain_gpu_decode", "dali") and c["device"] != "cuda":
            plan[side] = f"decodes JPEGs with nvJPEG on a CUDA device: not attempted on --device {c['device']}"
        elif side == "ddptrain_gpu_decode" and "data.decode" not in keys:
            plan[side] = "this ddptrain does not know data.decode"
        elif side == "dali" and not os.access(dali_python, os.X_OK):
            plan[side] = f"no DALI venv at {dali_python} (bench/requirements-dali.txt)"
        elif side == "ddptrain_graph" and c["device"] != "cuda":
            plan[side] = ("training.cuda_graph captures the step as a CUDA graph and needs a CUDA device: not "
                          f"attempted on --device {c['device']}")
        elif side == "ddptrain_graph" and unknown:
            plan[side] = f"this ddptrain does not know {', '.join(unknown)}"
        else:
            plan[side] = None
    return plan


def ddptrain_toml(c, init_path, keys, fp16_name, graph=False, decode="cpu", synthetic=False):
    """ddptrain's config for configuration c (graph: the ddptrain graph side's; decode: an image folder's
    data.decode, "gpu" with GPU_DECODE_WORKERS loader threads; synthetic: the same model on synthetic images). Keys an
    older ddptrain lacks are left out (and listed by the caller)."""
    amp_dtype = {"fp16": fp16_name, "bf16": "bfloat16" if fp16_name == "float16" else "bf16"}.get(c["precision"])
    data = "synthetic" if synthetic else c["data"]
    folder = data == "image_folder"
    workers = GPU_DECODE_WORKERS if decode == "gpu" else c["workers"]
    sections = {
        "job": [("out_dir", '"out"'), ("seed", c["seed"]), ("threads", c["threads"])],
        "data": [("dataset", f'"{data}"')]
        + ([("dir", json.dumps(c["data_dir"]))] if data != "synthetic" else [])
        + [("batch_size", c["batch"]), ("eval_batch_size", c["batch"]), ("workers", workers),
           ("pin_memory", "true" if c["device"] == "cuda" else "false"),
           ("drop_last", "true" if c["drop_last"] else "false")]
        + ([("synthetic_train_size", c["synthetic_size"]), ("synthetic_test_size", c["batch"])]
           if data == "synthetic" else [])
        + ([("image_size", c["image_size"])] if data == "synthetic" or folder else [])
        + ([("decode", f'"{decode}"')] if folder else []),
        "model": [("name", f'"{c["model"]}"'), ("in_channels", c["in_channels"]), ("num_classes", c["num_classes"]),
                  ("init_from", json.dumps(init_path)),
                  ("memory_format", '"channels_last"' if c["channels_last"] else '"contiguous"')],
        "optimizer": [("name", '"sgd"'), ("lr", c["lr"]), ("momentum", c["momentum"]), ("fused", "true")],
        "training": [("max_steps", c["steps"]), ("epochs", 100000), ("eval_every_epochs", 0),
                     ("cudnn_benchmark", "true" if c["cudnn_benchmark"] else "false"), ("grad_accum_steps", 1)]
        + ([("cuda_graph", "true")] if graph else []),
        "amp": [("enabled", "true" if amp_dtype else "false")] + ([("dtype", f'"{amp_dtype}"')] if amp_dtype else []),
        "checkpoint": [("resume", '"never"')],
        "dist": [("device", f'"{c["device"]}"')],
        "metrics": [("log_every_steps", c["log_every"]), ("progress", '"plain"')],
    }
    lines, missing = [], []
    for section, items in sections.items():
        lines.append(f"[{section}]")
        for key, value in items:
            if f"{section}.{key}" in keys:
                lines.append(f"{key} = {value}")
            else:
                missing.append(f"{section}.{key}")
        lines.append("")
    return "\n".join(lines), missing


def python_argv(c, init_path, run_dir, rank, compiled=False, dali=False):
    argv = [sys.executable, os.path.join(BENCH_DIR, "torch_worker.py"), "--model", c["model"], "--data", c["data"],
            "--data-dir", c["data_dir"], "--init", init_path, "--precision", c["precision"], "--device", c["device"],
            "--steps", str(c["steps"]), "--log-every", str(c["log_every"]), "--batch", str(c["batch"]),
            "--threads", str(c["threads"]), "--lr", str(c["lr"]), "--momentum", str(c["momentum"]),
            "--seed", str(c["seed"]), "--in-channels", str(c["in_channels"]), "--num-classes", str(c["num_classes"]),
            "--image-size", str(c["image_size"]), "--synthetic-size", str(c["synthetic_size"] or 1),
            "--workers", str(c["workers"]), "--result", os.path.join(run_dir, f"result.rank{rank}.json")]
    return argv + (["--channels-last"] if c["channels_last"] else []) + (
        ["--cudnn-benchmark"] if c["cudnn_benchmark"] else []) + (["--drop-last"] if c["drop_last"] else []) + (
        ["--compile", c["compile_mode"], "--compile-backend", c["compile_backend"]] if compiled else []) + (
        ["--loader", "dali", "--workers", str(DALI_THREADS)] if dali else [])


def dali_site_packages(dali_python):
    """The site-packages folder of the DALI venv (its packages join this Python's torch for the DALI side)."""
    out = subprocess.run([dali_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def run_side(side, c, args, work, rep, commands):
    run_dir = os.path.join(work, f"{side}.rep{rep}")
    os.makedirs(run_dir)
    port = launch.free_port()
    argvs, envs = [], []
    for rank in range(c["world"]):
        if side in DDPTRAIN_SIDES:
            argvs.append([args.ddptrain, os.path.join(work, f"{side}.toml"), f"--job.out_dir={run_dir}/out"])
        else:
            argvs.append(python_argv(c, os.path.join(work, "init.pt"), run_dir, rank, side == "python_compiled",
                                     side == "dali"))
        envs.append(launch.rank_env(c["threads"], rank, c["world"], port))
        if side == "dali":
            envs[-1]["PYTHONPATH"] = os.pathsep.join(
                p for p in (envs[-1].get("PYTHONPATH"), dali_site_packages(args.dali_python)) if p)
    commands.setdefault(side, command_text(argvs[0], envs[0]))
    r = launch.run_ranks(argvs, envs, run_dir, args.compile_timeout if side == "python_compiled" else args.timeout)
    out = {}
    if side in DDPTRAIN_SIDES:
        with open(os.path.join(run_dir, "out", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        peaks = [x["gpu_mem_peak_mib"] for x in records if x.get("kind") == "train" and "gpu_mem_peak_mib" in x]
        intervals, _ = ddptrain_intervals(os.path.join(run_dir, "out", "metrics.jsonl"))
        peak = max(peaks) if peaks else None
    else:
        with open(os.path.join(run_dir, "result.rank0.json")) as f:
            result = json.load(f)
        intervals, peak = result["intervals"], result.get("gpu_mem_peak_mib")
        if "compiled_at_steps" in result:
            out["compiled_at_steps"] = result["compiled_at_steps"]
    return dict(rate=timed_rate(intervals, c["warmup_steps"]), gpu_mem_peak_mib=peak, rss_mib=r["rss_mib"], **out)


def run_config(c, args, work_root, index, keys, fp16_name):
    work = os.path.join(work_root, f"config{index}")
    os.makedirs(work)
    torch.manual_seed(c["seed"])
    torch.save(dict(build_model(c["model"], 0.0, c["in_channels"], c["num_classes"]).state_dict()),
               os.path.join(work, "init.pt"))
    plan = side_plan(c, args.sides, keys, args.dali_python)
    if "folder" in c and any(plan[s] is None for s in ("ddptrain_eager", "ddptrain_gpu_decode", "python_eager",
                                                        "dali")):
        f = c["folder"]
        print(f"  JPEG folder {c['data_dir']} ({f['images']} images, made once)", flush=True)
        make_folder(c["data_dir"], f["images"], f["classes"], f["width"], f["height"], f["quality"])
    for side, changes in DDPTRAIN_SIDES.items():
        if side not in sides_of(c):
            continue
        text, missing_keys = ddptrain_toml(c, os.path.join(work, "init.pt"), keys, fp16_name, **changes)
        with open(os.path.join(work, f"{side}.toml"), "w") as f:
            f.write(text)
        if side == "ddptrain_eager":
            toml_text, missing = text, missing_keys
    running = [side for side in sides_of(c) if plan[side] is None]
    results = {side: [] for side in running}
    order, commands, failed = [], {}, []
    for rep in range(c["reps"]):
        for side in (running if rep % 2 == 0 else running[::-1]):
            if side in failed:
                continue
            try:
                r = run_side(side, c, args, work, rep, commands)
            except (launch.RunError, OSError, KeyError, ValueError) as e:
                # A side that fails is reported n/a with its error (and the run exits non-zero at the end); the
                # other sides go on, so that one failing side does not cost the others' figures.
                print(f"  rep {rep + 1}/{c['reps']} {name_of(c, side)} FAILED: {e}", flush=True)
                what = " ".join(str(e).split("\nstdout rank 0:")[0].split())[:300]  # stderr's tail, one line
                plan[side] = f"failed in repetition {rep + 1}: {what}"
                failed.append(side)
                results.pop(side)
                continue
            results[side].append(r)
            order.append((rep, side))
            print(f"  rep {rep + 1}/{c['reps']} {name_of(c, side):15s}: {r['rate']:9.1f} samples/s, peak GPU memory "
                  f"{report.fmt(r['gpu_mem_peak_mib'])} MiB, peak RSS {' / '.join(map(report.fmt, r['rss_mib']))} "
                  "MiB" + (f", compiled at steps {r['compiled_at_steps']}" if "compiled_at_steps" in r else ""),
                  flush=True)
    order = [(rep, side) for rep, side in order if side not in failed]
    return dict(plan=plan, results=results, order=order, commands=commands, toml=toml_text, missing=missing,
                failed=failed)


def divide(a, b):
    return None if a is None or b in (None, 0) else a / b


def summarize(c, results):
    """Each side's medians (None for a side that did not run) and the ratios of the medians: samples/s as the
    configuration's rate ratios (RATE_RATIOS by default), peak GPU memory and RSS of every side over Python eager's;
    keyed 'side/reference'."""
    med = {}
    sides = sides_of(c)
    for side in sides:
        reps = results.get(side, [])
        med[side] = {"rate": report.median([r["rate"] for r in reps]),
                     "gpu_mem_peak_mib": report.median([r["gpu_mem_peak_mib"] for r in reps]),
                     "rss_mib": report.median([v for r in reps for v in r["rss_mib"]])}
    pairs = {"rate": c.get("rate_ratios", RATE_RATIOS), "gpu_mem_peak_mib": [(s, BASELINE) for s in sides if s != BASELINE]}
    pairs["rss_mib"] = pairs["gpu_mem_peak_mib"]
    ratio = {metric: {f"{a}/{b}": divide(med[a][metric], med[b][metric]) for a, b in ab}
             for metric, ab in pairs.items()}
    return med, ratio


def times(value):
    return "n/a" if value is None else f"{value:.2f}x"


def goal_lines(c, plan, med, ratio):
    """(goal, figure, met | not met | n/a) for each of c's goals, from the medians' ratios."""
    lines = []
    for metric, side, ref, op, bound in c["goals"]:
        what, unit = METRIC_TEXT[metric]
        goal = f"{c['title']}: {name_of(c, side)} {what} {op} {bound:.1f}x {name_of(c, ref)}"
        value = ratio[metric][f"{side}/{ref}"]
        not_run = [s for s in (side, ref) if plan[s]]
        if not_run:
            figure = "; ".join(f"{name_of(c, s)} did not run: {plan[s]}" for s in not_run)
        else:
            figure = f"{report.fmt(med[side][metric])} vs {report.fmt(med[ref][metric])} {unit} = {times(value)}"
        met = None if value is None or not_run else (value >= bound if op == ">=" else value <= bound)
        lines.append((goal, figure, "n/a" if met is None else "met" if met else "not met"))
    return lines


def compile_note(c, results):
    """Where Python compiled's compilations fell, per repetition, against the warm-up."""
    steps = [r.get("compiled_at_steps", []) for r in results.get("python_compiled", [])]
    if not steps:
        return []
    late = sorted({s for rep in steps for s in rep if s > c["warmup_steps"]})
    where = "; ".join((f"step{'s' if len(rep) > 1 else ''} {', '.join(map(str, rep))}" if rep else "no step")
                      + f" in rep {k + 1}" for k, rep in enumerate(steps))
    warmup = f"steps 1-{c['warmup_steps']}" if c["warmup_steps"] > 1 else f"step {c['warmup_steps']}"
    if late:
        return [f"- {c['name']}: Python compiled's graphs were compiled at {where}: **step "
                f"{', '.join(map(str, late))} is after the warm-up ({warmup}), so its repetition's rate includes "
                "compiling**."]
    return [f"- {c['name']}: Python compiled's graphs were compiled at {where}, within the warm-up ({warmup}, not "
            "timed)."]


def label_of(c):
    return (f"{c['name']}, {c['precision']}, {'channels_last' if c['channels_last'] else 'contiguous'}, batch "
            f"{c['batch']}, world {c['world']}, {c['device']}, {c['steps']} steps (timed after step "
            f"{c['warmup_steps']}, interval {c['log_every']})")


def markdown_tables(rows):
    """rows: (label, c, med, ratio). Per set of sides (the four-sided configurations, the image folder's): samples/s
    of each side with the configuration's ratios; peak GPU memory and RSS of each side with its ratio over Python
    eager's."""
    groups = []
    for row in rows:
        key = tuple(sides_of(row[1]))
        if not groups or groups[-1][0] != key:
            groups.append((key, []))
        groups[-1][1].append(row)
    lines = []
    for sides, group in groups:
        c = group[0][1]
        ratios = c.get("rate_ratios", RATE_RATIOS)
        names = [name_of(c, s) for s in sides]
        rate = ["| configuration | " + " | ".join(f"{n} samples/s" for n in names) + " | "
                + " | ".join(f"{name_of(c, a)} / {name_of(c, b)}" for a, b in ratios) + " |",
                "| --- |" + " ---: |" * (len(sides) + len(ratios))]
        memory = ["| configuration | " + " | ".join(f"{n} peak GPU MiB" for n in names) + " | "
                  + " | ".join(f"{n} peak RSS MiB" for n in names) + " |", "| --- |" + " ---: |" * (2 * len(sides))]
        for label, _, med, ratio in group:
            rate.append(f"| {label} | " + " | ".join(report.fmt(med[s]["rate"]) for s in sides) + " | "
                        + " | ".join(times(ratio["rate"][f"{a}/{b}"]) for a, b in ratios) + " |")
            cells = []
            for metric in ("gpu_mem_peak_mib", "rss_mib"):
                for s in sides:
                    value = report.fmt(med[s][metric])
                    if s != BASELINE and med[s][metric] is not None and f"{s}/{BASELINE}" in ratio[metric]:
                        value += f" ({times(ratio[metric][f'{s}/{BASELINE}'])})"
                    cells.append(value)
            memory.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += (([""] if lines else []) + ["samples/s (medians) and their ratios:", ""] + rate
                  + ["", f"Peak GPU memory and peak host RSS (medians; in brackets, over {name_of(c, BASELINE)}'s):",
                     ""] + memory)
    return lines


def details(label, c, run):
    """The configuration's collapsible section: each repetition in the order run, the commands, ddptrain's config."""
    lines = [f"<details><summary>{label}: per repetition, commands, ddptrain's config</summary>", ""]
    index = {side: 0 for side in sides_of(c)}
    for rep, side in run["order"]:
        r = run["results"][side][index[side]]
        index[side] += 1
        lines.append(f"  - rep {rep + 1} {name_of(c, side)}: {report.fmt(r['rate'])} samples/s, peak GPU "
                     f"{report.fmt(r['gpu_mem_peak_mib'])} MiB, peak RSS {' / '.join(map(report.fmt, r['rss_mib']))}"
                     " MiB")
    lines += ["", "```sh"] + [run["commands"][s] for s in sides_of(c) if s in run["commands"]] + ["```", ""]
    if "folder" in c:
        lines += [f"ddptrain CPU decode's config (GPU decode's sets `decode = \"gpu\"` and `workers = "
                  f"{GPU_DECODE_WORKERS}` in `[data]`; synthetic's `dataset = \"synthetic\"`):"]
    else:
        lines += ["ddptrain eager's config (ddptrain graph's adds `cuda_graph = true` to `[training]`):"]
    lines += ["", "```toml", run["toml"], "```"]
    if run["missing"]:
        lines += ["", f"This ddptrain does not know {', '.join(run['missing'])}: left out of its config."]
    return lines + ["", "</details>", ""]


def compiled_text(c):
    """How Python compiled compiles, for the report."""
    if c["compile_backend"] != "inductor":
        return (f'`torch.compile(model, mode="{c["compile_mode"]}", backend="{c["compile_backend"]}")` (TorchDynamo\'s '
                f'capture run by the {c["compile_backend"]} backend: no compiler)')
    return (f'`torch.compile(model, mode="{c["compile_mode"]}")` (forward and backward compiled by TorchDynamo, '
            "AOTAutograd and Inductor" + ("; max-autotune autotunes Inductor's kernels and runs them as CUDA graphs)"
                                          if c["compile_mode"] == "max-autotune" else ")"))


def header(invocation, date, gpu, machine, c):
    return [f"Run {date} by `{invocation.strip()}`. GPU: {gpu}; {machine['nproc']} CPUs ({machine['cpu']}); "
            f"torch {machine['torch']}, torchvision {machine['torchvision']} (Python {machine['python']})."
            f" Every side: world 1, AMP {c['precision']} with loss scaling, channels_last, cudnn.benchmark "
            f"{'on' if c['cudnn_benchmark'] else 'off'}, SGD lr {c['lr']} momentum {c['momentum']}, full batches only "
            f"(drop_last), {c['workers']} batch-assembly workers; medians of {c['reps']} repetition"
            f"{'s' if c['reps'] != 1 else ''}, the sides in turn, in reverse order every other repetition.", "",
            "The sides: **ddptrain eager**, `optimizer.fused = true` (torch.optim's fused=True); **ddptrain graph**, "
            "the same with `training.cuda_graph = true` (after a warm-up the whole step, forward, backward, loss "
            "scaling and fused SGD, replayed as one CUDA graph); **Python eager**, `bench/torch_worker.py`; **Python "
            f"compiled**, the same with {compiled_text(c)}. Python's optimizer is eager `torch.optim.SGD` with its "
            "defaults in both Python sides (foreach on CUDA tensors, fused=False), its GradScaler eager too. "
            "Compilation falls in the warm-up, which is not timed (where, below); Python compiled's peak GPU memory "
            "includes what compiling and autotuning allocated. Peak GPU memory is the CUDA caching allocator's peak "
            "allocated bytes (ddptrain's `gpu_mem_peak_mib`, `torch.cuda.max_memory_allocated()`), peak RSS the "
            "process's maximum resident set; n/a where not reported or where a side did not run."]


def image_folder_text(c):
    """What the image-folder configuration's sides are, for the report."""
    f = c["folder"]
    return [f"The image-folder configuration trains on {f['images']} generated {f['width']}x{f['height']} JPEGs "
            f"(quality {f['quality']}, {f['classes']} classes, on local disk; `bench/data_bench.py`'s generator) with "
            f"RandomResizedCrop({c['image_size']}) + flip: **ddptrain CPU decode**, `data.decode = \"cpu\"` with "
            f"{c['workers']} loader threads; **ddptrain GPU decode**, `data.decode = \"gpu\"` (nvJPEG and the "
            f"transforms on the GPU) with {GPU_DECODE_WORKERS} loader threads, at most {GPU_DECODE_WORKERS + 1} CPU "
            f"threads with the training thread; **Python DataLoader**, `bench/torch_worker.py` with ImageFolder and "
            f"the v2 transforms, {c['workers']} workers; **DALI mixed**, `torch_worker.py --loader dali` "
            f"(`fn.decoders.image_random_crop(device=\"mixed\")`, {DALI_THREADS} threads); **ddptrain synthetic**, "
            "the same model and batch on synthetic images, the input pipeline's ceiling."]


def main(argv):
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this Python's torch sees no GPU (use --device cpu --smoke to check plumbing)")
    if not os.access(args.ddptrain, os.X_OK):
        raise SystemExit(f"{args.ddptrain} is not built")
    configs = configs_from(args)
    keys, fp16_name = ddptrain_capabilities(args.ddptrain)
    machine = report.machine_description(REPO)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (CPU run)"
    date = report.now_utc()
    work_root = args.work_dir or tempfile.mkdtemp(prefix="gpu_bench.")
    os.makedirs(work_root, exist_ok=True)
    rows, goals, notes, per_config, figures, failed = [], [], [], [], [], []
    for i, c in enumerate(configs):
        label = label_of(c)
        print(f"[{i + 1}/{len(configs)}] {label}", flush=True)
        run = run_config(c, args, work_root, i, keys, fp16_name)
        med, ratio = summarize(c, run["results"])
        rows.append((label, c, med, ratio))
        goals += goal_lines(c, run["plan"], med, ratio)
        notes += [f"- {c['name']}: {name_of(c, s)} n/a: {why}." for s, why in run["plan"].items() if why]
        notes += compile_note(c, run["results"])
        sides = {s: {"ran": why is None, "reason": why, "failed": s in run["failed"]} for s, why in run["plan"].items()}
        figures.append({"label": label, "config": c, "sides": sides,
                        "order": run["order"], "results": run["results"], "median": med, "ratio": ratio,
                        "ddptrain_keys_missing": run["missing"]})
        per_config += details(label, c, run)
        failed += [f"{c['name']}: {name_of(c, s)}" for s in run["failed"]]
    invocation = "python3 bench/gpu_bench.py " + " ".join(shlex.quote(a) for a in argv)
    goal_md = [f"- {g}: {fig}: **{v}**" for g, fig, v in goals]
    folders = [c for c in configs if "folder" in c]
    text = "\n".join(header(invocation, date, gpu, machine, configs[0])
                     + ([""] + image_folder_text(folders[0]) if folders else []) + [""] + markdown_tables(rows) + [""]
                     + notes + ([""] if notes else []) + goal_md + ([""] if goal_md else []) + per_config) + "\n"
    print()
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.goals:
        with open(args.goals, "w") as f:
            f.writelines(f"{g}\t{fig}\t{v}\n" for g, fig, v in goals)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": date, "gpu": gpu, "machine": machine, "invocation": invocation, "sides": list(SIDES),
                       "figures": figures, "goals": goals}, f, indent=1)
    if failed:  # the outputs are kept for a look at what failed
        raise SystemExit(f"failed: {'; '.join(failed)} (n/a in the report; outputs in {work_root})")
    if not args.work_dir:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
