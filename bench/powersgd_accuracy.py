"""PowerSGD's cost in accuracy: ResNet-18 on Fashion-MNIST (configs/resnet18.toml), 2 ranks under ddprun, trained
once with plain all-reduces and once with dist.grad_compression = "powersgd" (rank 2, compressed after the first 10%
of the steps, as Vogels et al. start after a warm-up), same seeds; prints both runs' test accuracy after each epoch
and keeps them in results/powersgd-accuracy/DATE.md (listed in RESULTS.md).

    .venv/bin/python bench/powersgd_accuracy.py [--epochs 2] [--rank 2] [-- EXTRA ddptrain overrides]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


def eval_accuracies(metrics_path):
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [(r["epoch"], r["accuracy"]) for r in records if r.get("kind") == "eval"]


def steps_per_epoch(train_size, batch, world):
    return (train_size + batch * world - 1) // (batch * world)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rank", type=int, default=2, help="dist.powersgd_rank")
    p.add_argument("--start-fraction", type=float, default=0.1, help="uncompressed share of the steps")
    p.add_argument("--config", default=os.path.join(REPO, "configs", "resnet18.toml"))
    p.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="job.threads per rank")
    p.add_argument("--batch", type=int, default=64, help="data.batch_size (per rank)")
    p.add_argument("--train-size", type=int, default=60000, help="Fashion-MNIST's training images")
    p.add_argument("--no-results", action="store_true")
    p.add_argument("extra", nargs="*", help="more --section.key=value overrides for both runs")
    args = p.parse_args(argv)
    total_steps = args.epochs * steps_per_epoch(args.train_size, args.batch, 2)
    start = max(2, round(args.start_fraction * total_steps))
    runs = {"all-reduce": [], "powersgd": [f"--dist.grad_compression=powersgd", f"--dist.powersgd_rank={args.rank}",
                                          f"--dist.powersgd_start_step={start}"]}
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for name, overrides in runs.items():
            out = os.path.join(work, name)
            cmd = [os.path.join(REPO, "build", "ddprun"), "--standalone", "--nproc-per-node", "2", "--",
                   os.path.join(REPO, "build", "ddptrain"), args.config, f"--job.out_dir={out}",
                   f"--training.epochs={args.epochs}", f"--job.threads={args.threads}",
                   f"--data.batch_size={args.batch}", "--checkpoint.every_steps=0", "--metrics.progress=plain",
                   "--training.eval_every_epochs=1"] + overrides + args.extra
            print("$ " + " ".join(cmd), flush=True)
            began = time.time()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            results[name] = (eval_accuracies(os.path.join(out, "metrics.jsonl")), time.time() - began, cmd)
    m = report.machine_description(REPO)
    lines = [f"Run {report.now_utc()}. Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} RAM; torch {m['torch']}; "
             f"ddptrain built from commit {m['ddptrain_commit']}.", "",
             f"ResNet-18 on Fashion-MNIST ({os.path.relpath(args.config, REPO)}), 2 ranks x {args.batch}, "
             f"{args.epochs} epochs ({total_steps} steps), PowerSGD rank {args.rank} from step {start} "
             f"({args.start_fraction:.0%} uncompressed), {args.threads} thread(s)/rank.", "",
             "| run | " + " | ".join(f"test accuracy after epoch {e}" for e, _ in results["all-reduce"][0]) +
             " | wall s |", "| --- |" + " --- |" * (len(results["all-reduce"][0]) + 1)]
    for name, (acc, seconds, _) in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{a * 100:.2f}%" for _, a in acc) + f" | {seconds:.0f} |")
    final = {name: acc[-1][1] for name, (acc, _, _) in results.items()}
    gap = (final["powersgd"] - final["all-reduce"]) * 100
    lines += ["", f"PowerSGD - all-reduce after the last epoch: {gap:+.2f} points.", "", "Commands:", ""]
    lines += ["    " + " ".join(cmd) for _, _, cmd in results.values()]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_results:
        print(f"(kept in {report.keep_run('powersgd_accuracy', text)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
