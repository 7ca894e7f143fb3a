# Operators and host reads of one steady-state training step: ddptrain against bench/torch_worker.py's Python loop.
#
# Both sides train the same model on the same data with the same batch and optimizer (SGD with momentum, fp32 unless
# --precision says otherwise, a world of one, one intra-op thread), and each traces one step after --warmup steps with
# LibTorch's profiler (ddptrain: profile.steps; Python: torch.profiler through torch_worker.py --trace-step). Counted
# from each Chrome trace, on the training thread: every ATen operator ("aten::" cpu_op events at every nesting level,
# what the dispatcher runs: on a GPU each leaf is a kernel launch, each one host time), the outermost ones, and the
# reads of a tensor's value to the host (aten::_local_scalar_dense: item(), a tensor's bool; on a GPU each waits for
# the device). ddptrain's step is everything its training thread ran between the step's start and end but the wait
# for its batch (ddptrain::data); Python's is torch_worker.py's "step" range: zero_grad to the step's figures, the
# batch's loading and normalisation before it left out. The step traced is not logged on either side.
#
#   .venv/bin/python bench/op_count.py                                   # net and resnet18, a table
#   .venv/bin/python bench/op_count.py --model resnet18 --json out.json  # one model, the figures as JSON too
#   .venv/bin/python bench/op_count.py --model net --diff                # and the operators whose counts differ
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "reference"))
from torch_reference import build_model  # noqa: E402

BATCH = {"net": 64, "resnet18": 32}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=sorted(BATCH), action="append", help="default: net and resnet18")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--python-kernels", choices=["plain", "ddptrain"], default="plain",
                   help="torch_worker.py --kernels: plain PyTorch modules, or ddptrain's convolution choices")
    p.add_argument("--ddptrain-option", action="append", default=[],
                   help="an extra --section.key=value for ddptrain (repeatable)")
    p.add_argument("--warmup", type=int, default=5, help="steps before the traced one")
    p.add_argument("--ddptrain", default=os.path.join(REPO, "build", "ddptrain"))
    p.add_argument("--json", help="write the figures here too")
    p.add_argument("--diff", action="store_true", help="list the operators whose counts differ")
    p.add_argument("--work-dir", help="keep the runs' outputs and traces here (default: a temporary folder, removed)")
    return p.parse_args(argv)


def events(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def inside(e, r):
    return e["tid"] == r["tid"] and e["ts"] >= r["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"]


def count(ops):
    """The figures of a step's operator events (each nested in the step, on its thread)."""
    aten = [e for e in ops if e["name"].startswith("aten::")]
    outer = [e for e in aten if not any(o is not e and inside(e, o) for o in aten)]
    return {"aten_ops": len(aten), "outermost_ops": len(outer),
            "host_reads": sum(e["name"] == "aten::_local_scalar_dense" for e in aten),
            "by_name": dict(collections.Counter(e["name"] for e in aten))}


def ddptrain_step(trace):
    """ddptrain's traced step: the training thread's operators but those of its wait for the batch."""
    ev = events(trace)
    # The training thread: the one that ran the step's forward (a ddptrain before the ddptrain::step range had it too).
    forward = [e for e in ev if e["name"] == "ddptrain::forward"]
    if not forward:
        raise SystemExit(f"{trace}: no ddptrain::forward range")
    tid = forward[0]["tid"]
    waits = [e for e in ev if e["name"] == "ddptrain::data" and e["tid"] == tid]
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e["tid"] == tid and not any(inside(e, w) for w in waits)]
    return count(ops)


def python_step(trace):
    ev = events(trace)
    step = [e for e in ev if e["name"] == "step" and e.get("cat") == "user_annotation"]
    if len(step) != 1:
        raise SystemExit(f"{trace}: {len(step)} step ranges, expected 1")
    return count([e for e in ev if e.get("cat") == "cpu_op" and inside(e, step[0])])


def run(cmd, env):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}")


def measure(model, args, work):
    batch, traced = BATCH[model], args.warmup + 1
    env = dict(os.environ, OMP_NUM_THREADS="1", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    for key in ("MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"):
        env.pop(key, None)
    out = os.path.join(work, "ddptrain-" + model)
    amp = [] if args.precision == "fp32" else ["--amp.enabled=true", f"--amp.dtype={args.precision}"]
    run([args.ddptrain, os.path.join(REPO, "configs", "quickstart.toml"), f"--job.out_dir={out}", "--job.threads=1", "--job.seed=0", f"--model.name={model}",
         "--model.in_channels=1", "--model.num_classes=10", "--model.dropout=0", "--data.dataset=synthetic",
         "--data.image_size=28", "--data.synthetic_train_size=2048", "--data.synthetic_test_size=16",
         f"--data.batch_size={batch}", "--data.workers=1", "--optimizer.name=sgd", "--optimizer.lr=0.01",
         "--optimizer.momentum=0.9", "--lr_scheduler.warmup_steps=0", "--lr_scheduler.decay=none",
         "--training.eval_every_epochs=0", f"--training.max_steps={traced + 1}",
         "--metrics.log_every_steps=1000", "--metrics.progress=off", "--checkpoint.resume=never",
         f"--profile.start_step={traced}", "--profile.steps=1"] + amp + args.ddptrain_option, env)
    init = os.path.join(work, model + "-init.pt")
    torch.manual_seed(0)
    torch.save(build_model(model, 0.0, 1, 10).state_dict(), init)
    trace = os.path.join(work, "python-" + model + ".json")
    run([sys.executable, os.path.join(BENCH_DIR, "torch_worker.py"), "--model", model, "--data", "synthetic",
         "--init", init, "--precision", args.precision, "--steps", str(traced + 1), "--log-every", "1000",
         "--threads", "1", "--batch", str(batch), "--dropout", "0", "--synthetic-size", "2048",
         "--kernels", args.python_kernels, "--trace-step", str(traced), "--trace", trace,
         "--result", os.path.join(work, "python-" + model + "-result.json")], env)
    return {"model": model, "batch": batch, "precision": args.precision,
            "ddptrain": ddptrain_step(os.path.join(out, "profile", "rank0.json")), "python": python_step(trace)}


def main(argv=None):
    args = parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work_dir or temporary
        os.makedirs(work, exist_ok=True)
        for model in args.model or ["net", "resnet18"]:
            results.append(measure(model, args, work))
    print(f"| model | batch | precision | ddptrain ATen ops | Python ATen ops | ddptrain outermost | Python outermost "
          f"| ddptrain host reads | Python host reads |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        d, p = r["ddptrain"], r["python"]
        print(f"| {r['model']} | {r['batch']} | {r['precision']} | {d['aten_ops']} | {p['aten_ops']} "
              f"| {d['outermost_ops']} | {p['outermost_ops']} | {d['host_reads']} | {p['host_reads']} |")
        if args.diff:
            names = sorted(set(d["by_name"]) | set(p["by_name"]))
            for n in names:
                a, b = d["by_name"].get(n, 0), p["by_name"].get(n, 0)
                if a != b:
                    print(f"    {n}: ddptrain {a}, Python {b}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
