# Benchmark harness: ddptrain vs a PyTorch DDP reference on the same workload, alternating, medians and ratios.
#
# Run with the project venv's Python (.venv/bin/python: torch 2.11, torchvision 0.26). See bench/README.md.
import argparse
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile

import torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import launch  # noqa: E402
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


def parse_args(argv):
    p = argparse.ArgumentParser(description="ddptrain vs PyTorch DDP (Python) on the same workload")
    p.add_argument("--suite", choices=["standard"], help="run the preset configurations instead of one")
    p.add_argument("--model", choices=["net", "resnet18"], default="net")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--world", type=int, choices=[1, 2], default=2)
    p.add_argument("--sync", choices=["on", "off"], default="on")
    p.add_argument("--python-kernels", choices=["plain", "ddptrain"], default="plain",
                   help="ddptrain: give the Python side ddptrain's convolution choices (channels_last for net, "
                        "padding-only kernel taps skipped for resnet18)")
    p.add_argument("--ddptrain-allreduce", choices=["auto", "gloo", "shm"], default="auto",
                   help="ddptrain's dist.allreduce (auto: shared memory between the ranks of one host)")
    p.add_argument("--data", choices=["fashion-mnist", "synthetic"], default="fashion-mnist")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
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
    p.add_argument("--results", default=os.path.join(BENCH_DIR, "RESULTS.md"))
    p.add_argument("--no-results", action="store_true", help="print only; leave RESULTS.md alone")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per launched run")
    p.add_argument("--work-dir", help="keep run outputs here (default: a temporary folder, removed)")
    return p.parse_args(argv)


def configs_from(args):
    keys = ("model", "precision", "world", "sync", "data", "steps", "log_every", "warmup_steps", "reps",
            "python_kernels", "ddptrain_allreduce")
    entries = STANDARD_SUITE if args.suite else [{k: getattr(args, k) for k in keys}]
    configs = []
    for entry in entries:
        c = dict(entry)
        c["steps"] = c.get("steps") or DEFAULT_STEPS[c["model"]]
        c["log_every"] = c.get("log_every") or DEFAULT_LOG_EVERY[c["model"]]
        c["warmup_steps"] = c.get("warmup_steps") or c["log_every"]
        c["python_kernels"] = c.get("python_kernels") or "plain"
        c["ddptrain_allreduce"] = c.get("ddptrain_allreduce") or "auto"
        c["reps"] = args.reps or c.get("reps") or 3
        c["threads"] = args.threads or max(1, (os.cpu_count() or 2) // c["world"])
        for k in ("batch", "lr", "momentum", "dropout", "seed", "synthetic_size", "data_dir", "ddptrain_workers"):
            c[k] = getattr(args, k)
        if c["warmup_steps"] >= c["steps"]:
            raise SystemExit(f"warm-up ({c['warmup_steps']} steps) leaves no timed interval of {c['steps']} steps")
        configs.append(c)
    return configs


def label_of(c):
    return (f"{c['model']} {c['precision']}, world {c['world']}, sync {c['sync']}, {c['data']}, "
            f"{c['steps']} steps (timed after step {c['warmup_steps']}, interval {c['log_every']}), "
            f"{c['threads']} thread(s)/rank"
            + (", Python with ddptrain's convolution choices" if c["python_kernels"] == "ddptrain" else "")
            + (f", ddptrain all-reduce {c['ddptrain_allreduce']}" if c["ddptrain_allreduce"] != "auto" else ""))


def write_init(c, path):
    torch.manual_seed(c["seed"])
    torch.save(dict(build_model(c["model"], c["dropout"]).state_dict()), path)


def ddptrain_toml(c, init_path):
    data_dir = f'dir = "{c["data_dir"]}"\n' if c["data"] != "synthetic" else ""
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
allreduce = "{c['ddptrain_allreduce']}"

[metrics]
log_every_steps = {c['log_every']}
progress = "plain"
"""


def ddptrain_launch(c, args, toml_path, run_dir, probe):
    extra = ["--training.max_steps=1", "--metrics.log_every_steps=1"] if probe else []
    argvs, envs, port = [], [], launch.free_port()
    for rank in range(c["world"]):
        out = os.path.join(run_dir, "out" if c["sync"] == "on" else f"out.rank{rank}")
        argvs.append([args.ddptrain, toml_path, f"--job.out_dir={out}"] + extra)
        # sync off: ddptrain has no switch for it, so each rank runs as an independent world of one.
        envs.append(launch.rank_env(c["threads"], rank, c["world"], port) if c["sync"] == "on"
                    else launch.rank_env(c["threads"]))
    return argvs, envs


def python_launch(c, init_path, run_dir, probe):
    argvs, envs, port = [], [], launch.free_port()
    for rank in range(c["world"]):
        argvs.append([sys.executable, os.path.join(BENCH_DIR, "torch_worker.py"), "--model", c["model"],
                      "--data", c["data"], "--data-dir", c["data_dir"], "--init", init_path,
                      "--precision", c["precision"], "--sync", c["sync"],
                      "--steps", "1" if probe else str(c["steps"]),
                      "--log-every", "1" if probe else str(c["log_every"]),
                      "--batch", str(c["batch"]), "--threads", str(c["threads"]), "--lr", str(c["lr"]),
                      "--momentum", str(c["momentum"]), "--dropout", str(c["dropout"]), "--seed", str(c["seed"]),
                      "--synthetic-size", str(c["synthetic_size"]), "--kernels", c["python_kernels"],
                      "--result", os.path.join(run_dir, f"result.rank{rank}.json")])
        envs.append(launch.rank_env(c["threads"], rank, c["world"], port))
    return argvs, envs


def timed_rate(intervals, warmup_steps):
    """intervals: [step at interval end, samples, seconds]. Samples/s over the intervals after the warm-up."""
    timed = [(n, s) for step, n, s in intervals if step > warmup_steps]
    if not timed:
        raise launch.RunError(f"no timed interval after step {warmup_steps}: {intervals}")
    return sum(n for n, _ in timed) / sum(s for _, s in timed)


def ddptrain_intervals(path):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [[r["step"], r["samples"], r["samples"] / r["samples_per_s"]] for r in records if r["kind"] == "train"]


def side_rate(side, c, run_dir):
    """Samples/s of the whole job: rank 0's all-reduced intervals (sync on), the sum over processes (sync off)."""
    ranks = range(c["world"]) if c["sync"] == "off" else [0]
    rates = []
    for rank in ranks:
        if side == "ddptrain":
            out = "out" if c["sync"] == "on" else f"out.rank{rank}"
            intervals = ddptrain_intervals(os.path.join(run_dir, out, "metrics.jsonl"))
        else:
            with open(os.path.join(run_dir, f"result.rank{rank}.json")) as f:
                intervals = json.load(f)["intervals"]
        rates.append(timed_rate(intervals, c["warmup_steps"]))
    return sum(rates)


def run_side(side, c, args, work, rep, commands):
    init_path = os.path.join(work, "init.pt")
    toml_path = os.path.join(work, "ddptrain.toml")
    results = {}
    probes = [False] if (args.no_startup_probe or c["log_every"] == 1) else [False, True]
    for probe in probes:
        run_dir = os.path.join(work, f"{side}.rep{rep}" + (".probe" if probe else ""))
        os.makedirs(run_dir)
        argvs, envs = (ddptrain_launch(c, args, toml_path, run_dir, probe) if side == "ddptrain"
                       else python_launch(c, init_path, run_dir, probe))
        commands.setdefault((side, probe), command_text(argvs[0], envs[0]))
        r = launch.run_ranks(argvs, envs, run_dir, args.timeout, stop_after_first_step=probe)
        if probe:
            results["first_step"] = r["first_step_s"]
        else:
            results["rate"] = side_rate(side, c, run_dir)
            results["rss"] = r["rss_mib"]
            results["first_step"] = r["first_step_s"] if c["log_every"] == 1 else None
    return results


def command_text(argv, env):
    keys = [k for k in launch.DIST_VARS + ("OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME") if k in env]
    return " ".join(f"{k}={env[k]}" for k in keys) + " " + " ".join(shlex.quote(a) for a in argv)


def run_config(c, args, work_root, index):
    work = os.path.join(work_root, f"config{index}")
    os.makedirs(work)
    write_init(c, os.path.join(work, "init.pt"))
    with open(os.path.join(work, "ddptrain.toml"), "w") as f:
        f.write(ddptrain_toml(c, os.path.join(work, "init.pt")))
    results = {side: {"rates": [], "first_step": [], "rss": []} for side in ("ddptrain", "python")}
    commands = {}
    for rep in range(c["reps"]):
        order = ("ddptrain", "python") if rep % 2 == 0 else ("python", "ddptrain")
        for side in order:
            r = run_side(side, c, args, work, rep, commands)
            results[side]["rates"].append(r["rate"])
            results[side]["first_step"].append(r["first_step"])
            results[side]["rss"].append(r["rss"])
            print(f"  rep {rep + 1}/{c['reps']} {side:8s}: {r['rate']:8.1f} samples/s, first step "
                  f"{report.fmt(r['first_step'], '.2f')} s, peak RSS/rank "
                  f"{' / '.join(report.fmt(x) for x in r['rss'])} MiB", flush=True)
    with open(os.path.join(work, "ddptrain.toml")) as f:
        toml_text = f.read()
    return results, commands, toml_text


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
    body, rows, rows_by_key, command_lines = [], [], {}, []
    for i, c in enumerate(configs):
        label = label_of(c)
        print(f"[{i + 1}/{len(configs)}] {label}", flush=True)
        results, commands, toml_text = run_config(c, args, work_root, i)
        lines, row = report.config_table(label, results)
        body += lines
        rows.append((label, row))
        # The sync-cost table pairs each side's defaults (ddptrain's all-reduce included) with its sync-off row.
        if c["python_kernels"] == "plain" and c["ddptrain_allreduce"] == "auto":
            rows_by_key[(c["model"], c["precision"], f"world {c['world']}", c["data"], c["sync"])] = row
        command_lines += [f"- {label}:", "  ```sh"] + [f"  {cmd}" for _, cmd in sorted(commands.items())]
        command_lines += ["  ```", "  ddptrain.toml:", "  ```toml"] + ["  " + l for l in toml_text.splitlines()]
        command_lines += ["  ```"]
    load_end = report.load_average()
    invocation = ".venv/bin/python bench/ddp_bench.py " + " ".join(shlex.quote(a) for a in argv)
    block = "\n".join(
        [f"## `{invocation.strip()}`", "",
         f"Run {date}. Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']} RAM, "
         f"Linux {machine['kernel']}; torch {machine['torch']} / torchvision {machine['torchvision']} "
         f"(Python {machine['python']}); ddptrain binary sha256 {binary_sha}..., built from the working tree at "
         f"commit {machine['ddptrain_commit']}. "
         f"Load average (1/5/15 min) at start {load_start}, at end {load_end}.", "",
         "**Noise:** this machine is shared with other agents building and running tests while the benchmark runs; "
         "the numbers are noisy (compare the per-repetition values) and only the two sides' ratio, measured "
         "alternately in the same window, is meaningful.", ""]
        + report.summary_table(rows) + report.sync_overhead_lines(rows_by_key) + body
        + ["<details><summary>Exact commands (rank 0; other ranks differ only in RANK/LOCAL_RANK and output "
           "paths; ddptrain is a copy of build/ddptrain taken at the start; the startup probe adds the step-1 "
           "overrides)</summary>", ""] + command_lines + ["", "</details>"])
    print()
    print(block)
    if not args.no_results:
        report.update_results_file(args.results, "ddp_bench " + " ".join(result_key_args(argv)), block)
        print(f"\n(updated {args.results})")
    if not args.work_dir:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
