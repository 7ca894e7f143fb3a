# Checkpoint stall harness: the same ddptrain job with checkpoint.async on and off, alternating, in one invocation.
# Every step is logged (metrics.jsonl's wall_s), so each step's wall time is known; a checkpoint's stall is the time
# the steps around it took beyond two median steps. Also the checkpoint's size and the job's peak RSS (rss_peak_mib,
# the maximum over ranks): what the background copy costs in memory.
#
# Run with the project venv's Python after building: .venv/bin/python bench/checkpoint_bench.py [--model resnet50
# --image-size 64 --batch 8 --world 2 --every 5 --steps 25 --reps 2]. See bench/README.md.
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import report  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="folder holding ddptrain and ddprun")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=8, help="per rank")
    p.add_argument("--world", type=int, default=2, help="ranks under ddprun on this host, one thread each")
    p.add_argument("--every", type=int, default=5, help="checkpoint.every_steps")
    p.add_argument("--steps", type=int, default=25, help="training.max_steps")
    p.add_argument("--reps", type=int, default=2, help="repetitions per side")
    p.add_argument("--checkpoint-dir", help="a folder on the filesystem to write the checkpoints to (each run its own "
                   "subfolder); default: the run's out_dir")
    p.add_argument("--results", help="write the block into this file instead of bench/results/")
    return p.parse_args(argv)


def steal_seconds():
    """CPU time the hypervisor took from this machine's CPUs since boot (/proc/stat's steal column, all CPUs)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def run_once(args, async_on, out_dir):
    cmd = [os.path.join(args.build, "ddprun"), f"--nproc-per-node={args.world}", "--",
           os.path.join(args.build, "ddptrain"), os.path.join(REPO, "configs", "quickstart.toml"),
           f"--job.out_dir={out_dir}", "--data.dataset=synthetic", f"--data.image_size={args.image_size}",
           f"--data.synthetic_train_size={args.batch * args.world * (args.steps + 5)}",
           "--data.synthetic_test_size=16", "--data.workers=1", "--model.in_channels=3", f"--model.name={args.model}",
           f"--data.batch_size={args.batch}", f"--training.max_steps={args.steps}", "--training.epochs=1",
           "--metrics.log_every_steps=1", "--metrics.progress=off", f"--checkpoint.every_steps={args.every}",
           f"--checkpoint.async={'true' if async_on else 'false'}", "--checkpoint.keep_last=2"]
    ckpt_dir = os.path.join(out_dir, "checkpoints")
    if args.checkpoint_dir:
        ckpt_dir = os.path.join(args.checkpoint_dir, os.path.basename(out_dir))
        cmd.append(f"--checkpoint.dir={ckpt_dir}")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    steal_start = steal_seconds()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    steal = steal_seconds() - steal_start
    if done.returncode != 0:
        sys.exit(f"checkpoint_bench: {shlex.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        train = [r for r in map(json.loads, f) if r.get("kind") == "train"]
    wall = {r["step"]: r["wall_s"] for r in train}
    step_s = {s: wall[s] - wall[s - 1] for s in wall if s - 1 in wall}
    # A save at step s runs after step s is logged: its time falls into step s + 1. The first steps warm up.
    saves = [s for s in range(args.every, args.steps, args.every) if s + 1 in step_s]
    plain = [t for s, t in step_s.items() if s > 2 and s not in saves and s - 1 not in saves]
    med = report.median(plain)
    stalls = [step_s[s] + step_s[s + 1] - 2 * med for s in saves]
    ckpt = os.path.join(ckpt_dir, f"step-{args.steps:08d}.pt")
    size_mib = os.path.getsize(ckpt) / 2**20
    if args.checkpoint_dir:
        shutil.rmtree(ckpt_dir)
    return {"median_step": med, "ratio": 1 + report.median(stalls) / med, "stall": report.median(stalls),
            "rss": max(r["rss_peak_mib"] for r in train), "size_mib": size_mib, "steal": steal}


def main(argv):
    args = parse_args(argv)
    machine = report.machine_description(REPO)
    date, load_start = report.now_utc(), report.load_average()
    runs = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for async_on in (True, False):
                runs[async_on].append(run_once(args, async_on, os.path.join(tmp, f"{rep}-{async_on}")))
    key = (f"checkpoint bench model {args.model} image {args.image_size} batch {args.batch} world {args.world} "
           f"every {args.every} steps {args.steps}")
    if args.checkpoint_dir:
        key += f" checkpoint-dir {args.checkpoint_dir}"
    rows = ["| checkpoint.async | median step | checkpoint step / median step | stall per save | peak RSS | "
            "checkpoint size | CPU time taken by the host (steal) per run |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for async_on in (True, False):
        r = runs[async_on]
        rows.append(f"| {'true' if async_on else 'false'} | {report.ms(report.median([x['median_step'] for x in r]))} | "
                    f"{', '.join(report.fmt(x['ratio']) + 'x' for x in r)} | "
                    f"{', '.join(report.ms(x['stall']) for x in r)} | "
                    f"{report.fmt(report.median([x['rss'] for x in r]))} MiB | {report.fmt(r[0]['size_mib'])} MiB | "
                    f"{', '.join(report.fmt(x['steal']) + ' s' for x in r)} |")
    added = report.median([x["rss"] for x in runs[True]]) - report.median([x["rss"] for x in runs[False]])
    invocation = ".venv/bin/python bench/checkpoint_bench.py " + " ".join(shlex.quote(a) for a in argv)
    header = (f"Run {date}. Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']} RAM; commit "
              f"{machine['ddptrain_commit']}. Load average at start {load_start}, at end {report.load_average()}. "
              "Both sides alternate in the same window; one value per repetition.")
    block = "\n".join([f"## `{invocation.strip()}`", "", header, "", *rows, "",
                       f"Peak RSS added by the background copy: {report.fmt(added)} MiB, "
                       f"{report.fmt(added / runs[True][0]['size_mib'])}x the checkpoint's size."])
    print(block)
    print("kept in", report.keep_run(key, block, args.results))


if __name__ == "__main__":
    main(sys.argv[1:])
