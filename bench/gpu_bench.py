# GPU benchmark: ddptrain against a Python PyTorch training loop on the same GPU and the same torch.
#
# Both sides train the same model from the same initial weights with the same batch, optimizer, precision (AMP fp16
# with loss scaling: ddptrain's amp.loss_scaling auto, Python's torch.amp.GradScaler), memory format (channels_last)
# and cudnn.benchmark, alternating over --reps repetitions. Measured: training samples/s after a warm-up (ddptrain's
# metrics.jsonl intervals; torch_worker.py times the same intervals) and peak GPU memory (the caching allocator's peak
# allocated bytes: ddptrain's gpu_mem_peak_mib, Python's torch.cuda.max_memory_allocated()), with each ratio
# ddptrain / Python. The launching, interval timing and reporting are ddp_bench.py's (launch.py, report.py).
#
#   python3 bench/gpu_bench.py --ddptrain build-gpu/ddptrain           # ResNet-50 synthetic 224 + ResNet-18 F-MNIST
#   .venv/bin/python bench/gpu_bench.py --device cpu --smoke           # plumbing check without a GPU (~1 min)
#
# A world of one (one GPU): neither side makes a process group or a DDP wrapper (ddptrain never does for a world of
# one; torch_worker.py does the same), so the comparison is of the training step, data feeding and startup around it.
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
from ddp_bench import command_text, ddptrain_intervals, timed_rate  # noqa: E402
sys.path.insert(0, os.path.join(BENCH_DIR, "..", "reference"))
from torch_reference import build_model  # noqa: E402

COMMON = dict(precision="fp16", channels_last=True, cudnn_benchmark=True, lr=0.01, momentum=0.9, seed=0, world=1)

# The GPU set: ResNet-50 on synthetic 3x224x224 images (ImageNet's shape and head) and ResNet-18 on
# Fashion-MNIST, both AMP fp16 and channels_last.
GPU_SUITE = [
    dict(COMMON, name="resnet50 synthetic 3x224x224", model="resnet50", data="synthetic", in_channels=3,
         image_size=224, num_classes=1000, batch=128, steps=100, log_every=10, warmup_steps=30, synthetic_size=2048,
         goal=True),
    dict(COMMON, name="resnet18 fashion-mnist 1x28x28", model="resnet18", data="fashion-mnist", in_channels=1,
         image_size=28, num_classes=10, batch=256, steps=300, log_every=20, warmup_steps=60, synthetic_size=0,
         goal=False),
]
# --smoke: the same plumbing in seconds (CPU: fp16 autocast and GradScaler("cpu") run there too).
SMOKE_SUITE = [
    dict(COMMON, name="smoke resnet18 synthetic 3x32x32", model="resnet18", data="synthetic", in_channels=3,
         image_size=32, num_classes=10, batch=8, steps=4, log_every=1, warmup_steps=1, synthetic_size=64,
         goal=False, cudnn_benchmark=False),
]


def parse_args(argv):
    p = argparse.ArgumentParser(description="ddptrain vs Python on one GPU")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--smoke", action="store_true", help="tiny ResNet-18 run, world 1, a few steps (plumbing check)")
    p.add_argument("--only", help="run only the configurations whose name contains this text")
    p.add_argument("--reps", type=int, help="repetitions per side (default 3, smoke 1)")
    p.add_argument("--steps", type=int, help="override every configuration's step count")
    p.add_argument("--workers", type=int, default=4, help="batch-assembly workers on both sides (ddptrain "
                   "data.workers, Python DataLoader num_workers with --device cuda)")
    p.add_argument("--threads", type=int, help="intra-op CPU threads per rank (default nproc / world)")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    default_ddptrain = os.path.join(REPO, "build-gpu", "ddptrain")
    if not os.access(default_ddptrain, os.X_OK):
        default_ddptrain = os.path.join(REPO, "build", "ddptrain")
    p.add_argument("--ddptrain", default=default_ddptrain)
    p.add_argument("--timeout", type=float, default=600, help="seconds per launched run")
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
        if c["device"] == "cpu":
            c["cudnn_benchmark"] = False
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


def ddptrain_toml(c, init_path, keys, fp16_name):
    """ddptrain's side of configuration c. Keys an older ddptrain lacks are left out (and listed by the caller)."""
    amp_dtype = {"fp16": fp16_name, "bf16": "bfloat16" if fp16_name == "float16" else "bf16"}.get(c["precision"])
    sections = {
        "job": [("out_dir", '"out"'), ("seed", c["seed"]), ("threads", c["threads"])],
        "data": [("dataset", f'"{c["data"]}"')]
        + ([("dir", json.dumps(c["data_dir"]))] if c["data"] != "synthetic" else [])
        + [("batch_size", c["batch"]), ("eval_batch_size", c["batch"]), ("workers", c["workers"]),
           ("pin_memory", "true" if c["device"] == "cuda" else "false")]
        + ([("synthetic_train_size", c["synthetic_size"]), ("synthetic_test_size", c["batch"]),
            ("image_size", c["image_size"])] if c["data"] == "synthetic" else []),
        "model": [("name", f'"{c["model"]}"'), ("in_channels", c["in_channels"]), ("num_classes", c["num_classes"]),
                  ("init_from", json.dumps(init_path)),
                  ("memory_format", '"channels_last"' if c["channels_last"] else '"contiguous"')],
        "optimizer": [("name", '"sgd"'), ("lr", c["lr"]), ("momentum", c["momentum"])],
        "training": [("max_steps", c["steps"]), ("epochs", 100000), ("eval_every_epochs", 0),
                     ("cudnn_benchmark", "true" if c["cudnn_benchmark"] else "false")],
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


def python_argv(c, init_path, run_dir, rank):
    argv = [sys.executable, os.path.join(BENCH_DIR, "torch_worker.py"), "--model", c["model"], "--data", c["data"],
            "--data-dir", c["data_dir"], "--init", init_path, "--precision", c["precision"], "--device", c["device"],
            "--steps", str(c["steps"]), "--log-every", str(c["log_every"]), "--batch", str(c["batch"]),
            "--threads", str(c["threads"]), "--lr", str(c["lr"]), "--momentum", str(c["momentum"]),
            "--seed", str(c["seed"]), "--in-channels", str(c["in_channels"]), "--num-classes", str(c["num_classes"]),
            "--image-size", str(c["image_size"]), "--synthetic-size", str(c["synthetic_size"] or 1),
            "--workers", str(c["workers"]), "--result", os.path.join(run_dir, f"result.rank{rank}.json")]
    return argv + (["--channels-last"] if c["channels_last"] else []) + (
        ["--cudnn-benchmark"] if c["cudnn_benchmark"] else [])


def launch_side(side, c, args, work, run_dir):
    port = launch.free_port()
    argvs, envs = [], []
    for rank in range(c["world"]):
        if side == "ddptrain":
            argvs.append([args.ddptrain, os.path.join(work, "ddptrain.toml"), f"--job.out_dir={run_dir}/out"])
        else:
            argvs.append(python_argv(c, os.path.join(work, "init.pt"), run_dir, rank))
        envs.append(launch.rank_env(c["threads"], rank, c["world"], port))
    return argvs, envs


def run_side(side, c, args, work, rep, commands):
    run_dir = os.path.join(work, f"{side}.rep{rep}")
    os.makedirs(run_dir)
    argvs, envs = launch_side(side, c, args, work, run_dir)
    commands.setdefault(side, command_text(argvs[0], envs[0]))
    r = launch.run_ranks(argvs, envs, run_dir, args.timeout)
    if side == "ddptrain":
        with open(os.path.join(run_dir, "out", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        peaks = [x["gpu_mem_peak_mib"] for x in records if x.get("kind") == "train" and "gpu_mem_peak_mib" in x]
        intervals, _ = ddptrain_intervals(os.path.join(run_dir, "out", "metrics.jsonl"))
        peak = max(peaks) if peaks else None
    else:
        with open(os.path.join(run_dir, "result.rank0.json")) as f:
            result = json.load(f)
        intervals, peak = result["intervals"], result.get("gpu_mem_peak_mib")
    return {"rate": timed_rate(intervals, c["warmup_steps"]), "gpu_mem_peak_mib": peak, "rss_mib": r["rss_mib"]}


def run_config(c, args, work_root, index, keys, fp16_name):
    work = os.path.join(work_root, f"config{index}")
    os.makedirs(work)
    torch.manual_seed(c["seed"])
    torch.save(dict(build_model(c["model"], 0.0, c["in_channels"], c["num_classes"]).state_dict()),
               os.path.join(work, "init.pt"))
    toml_text, missing = ddptrain_toml(c, os.path.join(work, "init.pt"), keys, fp16_name)
    with open(os.path.join(work, "ddptrain.toml"), "w") as f:
        f.write(toml_text)
    results = {side: [] for side in ("ddptrain", "python")}
    commands = {}
    for rep in range(c["reps"]):
        for side in (("ddptrain", "python") if rep % 2 == 0 else ("python", "ddptrain")):
            r = run_side(side, c, args, work, rep, commands)
            results[side].append(r)
            print(f"  rep {rep + 1}/{c['reps']} {side:8s}: {r['rate']:9.1f} samples/s, peak GPU memory "
                  f"{report.fmt(r['gpu_mem_peak_mib'])} MiB, peak RSS {' / '.join(map(report.fmt, r['rss_mib']))} "
                  "MiB", flush=True)
    return results, commands, toml_text, missing


def summarize(c, results):
    med = {}
    for side, reps in results.items():
        med[side] = {"rate": report.median([r["rate"] for r in reps]),
                     "gpu_mem_peak_mib": report.median([r["gpu_mem_peak_mib"] for r in reps]),
                     "rss_mib": report.median([v for r in reps for v in r["rss_mib"]])}
    ratio = {k: (med["ddptrain"][k] / med["python"][k] if med["ddptrain"][k] is not None
                 and med["python"][k] not in (None, 0) else None) for k in ("rate", "gpu_mem_peak_mib", "rss_mib")}
    return med, ratio


def goal_lines(c, med, ratio):
    """The issue's goals for the ResNet-50 fp16 row: samples/s >= 1.0x Python, peak GPU memory <= 1.0x."""
    if not c["goal"] or c["device"] != "cuda":
        return []
    rate_fig = (f"{report.fmt(med['ddptrain']['rate'])} vs {report.fmt(med['python']['rate'])} samples/s = "
                f"{report.ratio(med['ddptrain']['rate'], med['python']['rate'])}")
    mem_fig = (f"{report.fmt(med['ddptrain']['gpu_mem_peak_mib'])} vs {report.fmt(med['python']['gpu_mem_peak_mib'])}"
               f" MiB = {report.ratio(med['ddptrain']['gpu_mem_peak_mib'], med['python']['gpu_mem_peak_mib'])}")
    verdict = lambda ok: "n/a" if ok is None else ("met" if ok else "not met")  # noqa: E731
    return [("ResNet-50 fp16 samples/s >= 1.0x Python", rate_fig,
             verdict(None if ratio["rate"] is None else ratio["rate"] >= 1.0)),
            ("ResNet-50 fp16 peak GPU memory <= 1.0x Python", mem_fig,
             verdict(None if ratio["gpu_mem_peak_mib"] is None else ratio["gpu_mem_peak_mib"] <= 1.0))]


def label_of(c):
    return (f"{c['name']}, {c['precision']}, {'channels_last' if c['channels_last'] else 'contiguous'}, batch "
            f"{c['batch']}, world {c['world']}, {c['device']}, {c['steps']} steps (timed after step "
            f"{c['warmup_steps']}, interval {c['log_every']})")


def markdown(rows, per_config, goals, header):
    head = ["| configuration | ddptrain samples/s | Python samples/s | ratio | ddptrain peak GPU MiB | "
            "Python peak GPU MiB | ratio | ddptrain peak RSS MiB | Python peak RSS MiB |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    body = []
    for label, med, ratio in rows:
        d, p = med["ddptrain"], med["python"]
        body.append(f"| {label} | {report.fmt(d['rate'])} | {report.fmt(p['rate'])} | "
                    f"{report.ratio(d['rate'], p['rate'])} | {report.fmt(d['gpu_mem_peak_mib'])} | "
                    f"{report.fmt(p['gpu_mem_peak_mib'])} | "
                    f"{report.ratio(d['gpu_mem_peak_mib'], p['gpu_mem_peak_mib'])} | {report.fmt(d['rss_mib'])} | "
                    f"{report.fmt(p['rss_mib'])} |")
    goal_md = [f"- {g}: {fig}: **{v}**" for g, fig, v in goals]
    return "\n".join(header + [""] + head + body + [""] + goal_md + ([""] if goal_md else []) + per_config) + "\n"


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
    rows, goals, per_config, figures = [], [], [], []
    for i, c in enumerate(configs):
        label = label_of(c)
        print(f"[{i + 1}/{len(configs)}] {label}", flush=True)
        results, commands, toml_text, missing = run_config(c, args, work_root, i, keys, fp16_name)
        med, ratio = summarize(c, results)
        rows.append((label, med, ratio))
        goals += goal_lines(c, med, ratio)
        figures.append({"label": label, "config": c, "results": results, "median": med, "ratio": ratio,
                        "ddptrain_keys_missing": missing})
        per_rep = [f"  - rep {k + 1} {side}: {report.fmt(r['rate'])} samples/s, peak GPU "
                   f"{report.fmt(r['gpu_mem_peak_mib'])} MiB" for side, reps in results.items()
                   for k, r in enumerate(reps)]
        per_config += [f"<details><summary>{label}: per repetition, commands, ddptrain.toml</summary>", ""] + per_rep
        per_config += ["", "```sh"] + [commands[s] for s in sorted(commands)] + ["```", "", "```toml", toml_text, "```"]
        if missing:
            per_config += ["", f"This ddptrain does not know {', '.join(missing)}: left out of its config."]
        per_config += ["", "</details>", ""]
    invocation = "python3 bench/gpu_bench.py " + " ".join(shlex.quote(a) for a in argv)
    header = [f"Run {date} by `{invocation.strip()}`. GPU: {gpu}; {machine['nproc']} CPUs ({machine['cpu']}); "
              f"torch {machine['torch']}, torchvision {machine['torchvision']} (Python {machine['python']}). "
              "Both sides: world 1, AMP "
              f"{configs[0]['precision']} with loss scaling, channels_last, cudnn.benchmark "
              f"{'on' if configs[0]['cudnn_benchmark'] else 'off'}, SGD lr {configs[0]['lr']} momentum "
              f"{configs[0]['momentum']}, {configs[0]['workers']} batch-assembly workers; medians of "
              f"{configs[0]['reps']} alternating repetitions. Ratios are ddptrain / Python. Peak GPU memory is the "
              "CUDA caching allocator's peak allocated bytes (ddptrain's `gpu_mem_peak_mib`, "
              "`torch.cuda.max_memory_allocated()`); n/a where not reported."]
    text = markdown(rows, per_config, goals, header)
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
            json.dump({"date": date, "gpu": gpu, "machine": machine, "invocation": invocation, "figures": figures,
                       "goals": goals}, f, indent=1)
    if not args.work_dir:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
