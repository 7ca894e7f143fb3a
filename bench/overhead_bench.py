# Overhead harness: this tree's ddptrain against a baseline build of it on the same workload, alternating, medians
# and their ratio: what a change to the training loop costs in samples/s. With --endpoint, this tree's side serves
# metrics.listen and is scraped while it trains (the baseline may be the same binary): what the endpoint costs.
#
# Run with the project venv's Python: .venv/bin/python bench/overhead_bench.py --baseline OTHER/build/ddptrain
# [--endpoint [--scrape-every S]] [ddp_bench.py's workload flags]. See bench/README.md.
import argparse
import glob
import os
import shlex
import shutil
import sys
import tempfile
import threading
import urllib.request

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import ddp_bench  # noqa: E402
import launch  # noqa: E402
import report  # noqa: E402


def split_args(argv):
    """(this harness's own options, the rest of argv for ddp_bench's parser)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--baseline", required=True, help="the other ddptrain binary")
    p.add_argument("--endpoint", action="store_true",
                   help="this tree's side serves metrics.listen on a free loopback port and is scraped")
    p.add_argument("--scrape-every", type=float, default=1.0,
                   help="seconds between two GETs of /metrics and /healthz with --endpoint (default 1)")
    own, rest = p.parse_known_args(argv)
    return own, rest


class Scraper:
    """GETs /metrics and /healthz every `every` seconds while a run trains, as a Prometheus job would, and reads the
    CPU time of ddptrain's serving thread (named ddp-metrics) as it goes."""

    THREAD_NAME = "ddp-metrics"

    def __init__(self, port, every):
        self.url, self.every = f"http://127.0.0.1:{port}", every
        self.scrapes, self.last_page = 0, ""
        self.stat_path, self.cpu_ticks = None, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def find_thread(self):
        for task_dir in glob.glob("/proc/[0-9]*/task/[0-9]*"):
            try:
                with open(os.path.join(task_dir, "comm")) as f:
                    if f.read().strip() == self.THREAD_NAME:
                        return os.path.join(task_dir, "stat")
            except OSError:
                pass
        return None

    def read_cpu(self):
        """The serving thread's user + system clock ticks so far (kept when the thread is gone)."""
        self.stat_path = self.stat_path or self.find_thread()
        try:
            with open(self.stat_path or "/nonexistent") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            self.cpu_ticks = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass

    def loop(self):
        while not self.stop.wait(self.every):
            try:
                with urllib.request.urlopen(self.url + "/metrics", timeout=2) as r:
                    self.last_page = r.read().decode()
                urllib.request.urlopen(self.url + "/healthz", timeout=2).close()
                self.scrapes += 1
                self.read_cpu()
            except OSError:
                pass  # not listening yet, or already gone, or /healthz answering 503 before the first step


    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def cpu_text(ticks):
    """CPU time in clock ticks as text; the kernel counts a thread's time in whole ticks (10 ms at 100 Hz)."""
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    return f"{ticks * tick_ms:.0f} CPU-ms" if ticks else f"under one {tick_ms:.0f} ms clock tick of CPU"


def rate_of(binary, c, args, work, name, scrape_every=None):
    """One run of `binary` on config c: (rank 0's samples/s over the timed intervals, its Scraper or None).

    scrape_every: serve metrics.listen on a free port and GET it every scrape_every seconds while the run trains."""
    run_dir = os.path.join(work, name)
    os.makedirs(run_dir)
    args.ddptrain = binary
    argvs, envs = ddp_bench.ddptrain_launch(c, args, os.path.join(work, "ddptrain.toml"), run_dir, probe=False)
    if scrape_every is None:
        launch.run_ranks(argvs, envs, run_dir, args.timeout)
        return ddp_bench.side_rate("ddptrain", c, run_dir)[0], None
    port = launch.free_port()
    for argv in argvs:
        argv.append(f"--metrics.listen=127.0.0.1:{port}")
    with Scraper(port, scrape_every) as scraper:
        launch.run_ranks(argvs, envs, run_dir, args.timeout)
    if "ddptrain_step" not in scraper.last_page:
        raise launch.RunError(f"{name}: no /metrics page with ddptrain_step was scraped from port {port}")
    return ddp_bench.side_rate("ddptrain", c, run_dir)[0], scraper


def main(argv):
    own, rest = split_args(argv)
    baseline = own.baseline
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
        rates, scrapers = {"this tree": [], "baseline": []}, []
        for rep in range(c["reps"]):
            for side in (("this tree", "baseline") if rep % 2 == 0 else ("baseline", "this tree")):
                every = own.scrape_every if own.endpoint and side == "this tree" else None
                r, scraper = rate_of(binaries[side], c, args, work, f"{side.replace(' ', '_')}.rep{rep}", every)
                rates[side].append(r)
                scraped = ""
                if scraper is not None:
                    scrapers.append(scraper)
                    scraped = (f" ({scraper.scrapes} scrapes of /metrics and /healthz, serving thread "
                               f"{cpu_text(scraper.cpu_ticks)})")
                print(f"  rep {rep + 1}/{c['reps']} {side:9s}: {r:8.1f} samples/s{scraped}", flush=True)
        mine, base = report.median(rates["this tree"]), report.median(rates["baseline"])
        lines.append(f"| {label} | {report.fmt(mine)} | {report.fmt(base)} | {report.ratio(mine, base)} | "
                     f"{', '.join(report.fmt(r) for r in rates['this tree'])}; "
                     f"{', '.join(report.fmt(r) for r in rates['baseline'])}"
                     + (f" (this tree: {sum(x.scrapes for x in scrapers)} scrapes, serving thread "
                        f"{cpu_text(sum(x.cpu_ticks for x in scrapers))} in all)" if scrapers else "") + " |")
    invocation = ".venv/bin/python bench/overhead_bench.py " + " ".join(shlex.quote(a) for a in argv)
    block = "\n".join(
        [f"## `{invocation.strip()}`", "",
         f"Run {date}. Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']} RAM; this tree: "
         f"commit {machine['ddptrain_commit']} (binary sha256 {binaries['this tree sha']}...), baseline binary "
         f"sha256 {binaries['baseline sha']}.... Load average at start {load_start}, at end "
         f"{report.load_average()}. Both sides alternate in the same window; medians of the repetitions."
         + (f" This tree's side serves metrics.listen on loopback, GET /metrics and /healthz every "
            f"{own.scrape_every:g} s while it trains." if own.endpoint else ""), ""]
        + lines)
    print()
    print(block)
    if not args.no_results:
        key_args = ddp_bench.result_key_args([a for a in argv if not a.startswith("--baseline")])
        written = report.keep_run("overhead_bench " + " ".join(key_args), block, args.results)
        print(f"\n(updated {written})")
    if not args.work_dir:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
