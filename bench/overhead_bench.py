# Overhead harness: this tree's ddptrain against a baseline build of it on the same workload, alternating, medians
# and their ratio: what a change to the training loop costs in samples/s.
#
# Run with the project venv's Python: .venv/bin/python bench/overhead_bench.py --baseline OTHER/build/ddptrain
# [ddp_bench.py's workload flags]. See bench/README.md.
import os
import shlex
import shutil
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import ddp_bench  # noqa: E402
import launch  # noqa: E402
import report  # noqa: E402


def split_baseline(argv):
    """(--baseline PATH, the rest of argv for ddp_bench's parser)."""
    rest, baseline, i = [], None, 0
    while i < len(argv):
        if argv[i] == "--baseline" and i + 1 < len(argv):
            baseline, i = argv[i + 1], i + 2
        elif argv[i].startswith("--baseline="):
            baseline, i = argv[i].split("=", 1)[1], i + 1
        else:
            rest, i = rest + [argv[i]], i + 1
    if not baseline:
        raise SystemExit("usage: overhead_bench.py --baseline PATH/TO/ddptrain [ddp_bench.py workload flags]")
    return baseline, rest


def rate_of(binary, c, args, work, name):
    """One run of `binary` on config c: rank 0's samples/s over the timed intervals."""
    run_dir = os.path.join(work, name)
    os.makedirs(run_dir)
    args.ddptrain = binary
    argvs, envs = ddp_bench.ddptrain_launch(c, args, os.path.join(work, "ddptrain.toml"), run_dir, probe=False)
    launch.run_ranks(argvs, envs, run_dir, args.timeout)
    return ddp_bench.side_rate("ddptrain", c, run_dir)[0]


def main(argv):
    baseline, rest = split_baseline(argv)
    args = ddp_bench.parse_args(rest)
    if args.link or args.suite == "link":
        raise SystemExit("overhead_bench.py runs both binaries on one host; --link is ddp_bench.py's")
    work_root = args.work_dir or tempfile.mkdtemp(prefix="overhead_bench.")
    os.makedirs(work_root, exist_ok=True)
    binaries = {}
    for side, path in (("this tree", args.ddptrain), ("baseline", baseline)):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path} is not an executable ddptrain")
        os.makedirs(os.path.join(work_root, side.replace(" ", "_")))
        binaries[side], sha = ddp_bench.freeze_binary(path, os.path.join(work_root, side.replace(" ", "_")))
        binaries[side + " sha"] = sha
    machine = report.machine_description(ddp_bench.REPO)
    date, load_start = report.now_utc(), report.load_average()
    lines = ["| configuration | this tree samples/s | baseline samples/s | this tree / baseline | per repetition "
             "(this tree; baseline) |", "| --- | ---: | ---: | ---: | --- |"]
    for i, c in enumerate(ddp_bench.configs_from(args)):
        label = ddp_bench.label_of(c)
        print(f"[{i + 1}] {label}", flush=True)
        work = os.path.join(work_root, f"config{i}")
        os.makedirs(work)
        ddp_bench.write_init(c, os.path.join(work, "init.pt"))
        with open(os.path.join(work, "ddptrain.toml"), "w") as f:
            f.write(ddp_bench.ddptrain_toml(c, os.path.join(work, "init.pt")))
        rates = {"this tree": [], "baseline": []}
        for rep in range(c["reps"]):
            for side in (("this tree", "baseline") if rep % 2 == 0 else ("baseline", "this tree")):
                r = rate_of(binaries[side], c, args, work, f"{side.replace(' ', '_')}.rep{rep}")
                rates[side].append(r)
                print(f"  rep {rep + 1}/{c['reps']} {side:9s}: {r:8.1f} samples/s", flush=True)
        mine, base = report.median(rates["this tree"]), report.median(rates["baseline"])
        lines.append(f"| {label} | {report.fmt(mine)} | {report.fmt(base)} | {report.ratio(mine, base)} | "
                     f"{', '.join(report.fmt(r) for r in rates['this tree'])}; "
                     f"{', '.join(report.fmt(r) for r in rates['baseline'])} |")
    invocation = ".venv/bin/python bench/overhead_bench.py " + " ".join(shlex.quote(a) for a in argv)
    block = "\n".join(
        [f"## `{invocation.strip()}`", "",
         f"Run {date}. Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']} RAM; this tree: "
         f"commit {machine['ddptrain_commit']} (binary sha256 {binaries['this tree sha']}...), baseline binary "
         f"sha256 {binaries['baseline sha']}.... Load average at start {load_start}, at end "
         f"{report.load_average()}. Both sides alternate in the same window; medians of the repetitions.", ""]
        + lines)
    print()
    print(block)
    if not args.no_results:
        key_args = ddp_bench.result_key_args([a for a in argv if not a.startswith("--baseline")])
        report.update_results_file(args.results, "overhead_bench " + " ".join(key_args), block)
        print(f"\n(updated {args.results})")
    if not args.work_dir:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
