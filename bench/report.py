# Reporting for ddp_bench.py: machine description, medians and ratios as markdown, and the run files of bench/results/.
import datetime
import glob
import hashlib
import math
import os
import platform
import re
import statistics
import subprocess

HEADER = """# ddptrain vs PyTorch DDP: benchmark results

Written by `bench/ddp_bench.py` (see `bench/README.md`); every number below comes from an actual run of it, on
the machine described in its block. Each block is replaced when the same command is run again.

How to read them: samples/s is the whole job's training throughput after a warm-up (ddptrain's own
`metrics.jsonl` intervals; the Python side times the same intervals), so ddptrain's final evaluation is not in
it. "sync off" for ddptrain means each rank runs as an independent world of one (ddptrain has no switch to turn
gradient synchronisation off); for Python, a plain model in each process without a process group. A world of
one has no process group on either side. Ratios are ddptrain / Python: above 1 for samples/s favours ddptrain,
below 1 for time and memory favours ddptrain.

"""


def machine_description(repo):
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
        cpu = m.group(1).strip() if m else cpu
    with open("/proc/meminfo") as f:
        kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
    import torch
    import torchvision

    commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "gpus": ", ".join(f"{n} x {gpus.count(n)}" for n in dict.fromkeys(gpus)) or "none",
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": f"{kb / 1024 / 1024:.1f} GiB",
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "ddptrain_commit": commit.stdout.strip() or "unknown",
    }


def load_average():
    return "%.2f %.2f %.2f" % os.getloadavg()


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec=None):
    """spec None: whole numbers from 100 up, otherwise three significant digits (2.83, 12.4)."""
    if value is None:
        return "n/a"
    if spec is None:
        spec = ".0f" if abs(value) >= 100 else ".1f" if abs(value) >= 10 else ".2f"
    return format(value, spec)


def times(value):
    """A ratio as "1.23x": two decimals, or below 0.1 as many as two significant digits take ("0.0042x"), never
    rounded to zero."""
    if not 0 < value < 0.1:  # NaN too
        return f"{value:.2f}x"
    return f"{value:.{1 - math.floor(math.log10(value))}f}x"


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else times(a / b)


def rss_text(per_rep_rss):
    """Median peak RSS per rank over repetitions, 'r0 / r1' MiB."""
    ranks = len(per_rep_rss[0])
    return " / ".join(fmt(median([rep[r] for rep in per_rep_rss])) for r in range(ranks))


def rss_median_all(per_rep_rss):
    return median([v for rep in per_rep_rss for v in rep])


def config_table(label, results):
    """results: side -> dict(rates[], first_step[], rss[[per rank]]). One markdown table for one configuration."""
    d, p = results["ddptrain"], results["python"]
    rd, rp = median(d["rates"]), median(p["rates"])
    sd, sp = median(d["first_step"]), median(p["first_step"])
    md, mp = rss_median_all(d["rss"]), rss_median_all(p["rss"])
    reps = len(d["rates"])
    lines = [
        f"#### {label}",
        "",
        "| | ddptrain | PyTorch DDP (Python) | ddptrain / Python |",
        "| --- | ---: | ---: | ---: |",
        f"| train samples/s, median of {reps} | {fmt(rd)} | {fmt(rp)} | {ratio(rd, rp)} |",
        f"| samples/s per repetition | {', '.join(fmt(r) for r in d['rates'])} "
        f"| {', '.join(fmt(r) for r in p['rates'])} | |",
        f"| start to first optimizer step, s (median) | {fmt(sd, '.2f')} | {fmt(sp, '.2f')} | {ratio(sd, sp)} |",
        f"| first step per repetition, s | {', '.join(fmt(t, '.2f') for t in d['first_step'])} "
        f"| {', '.join(fmt(t, '.2f') for t in p['first_step'])} | |",
        f"| peak RSS per rank, MiB (median; rank 0 / rank 1) | {rss_text(d['rss'])} | {rss_text(p['rss'])} "
        f"| {ratio(md, mp)} |",
        "",
    ]
    return lines, (rd, rp, sd, sp, md, mp)


def summary_table(rows):
    lines = [
        "| configuration | ddptrain samples/s | Python samples/s | ratio | ddptrain first step s | Python first step s "
        "| ddptrain RSS/rank MiB | Python RSS/rank MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, (rd, rp, sd, sp, md, mp) in rows:
        lines.append(f"| {label} | {fmt(rd)} | {fmt(rp)} | {ratio(rd, rp)} | {fmt(sd, '.2f')} | {fmt(sp, '.2f')} "
                     f"| {fmt(md)} | {fmt(mp)} |")
    return lines + [""]


def sync_cost_per_step(global_batch, rate_on, rate_off):
    """Seconds per step that gradient sync adds: the step time with sync on less the one without."""
    if not rate_on or not rate_off:
        return None
    return global_batch * (1 / rate_on - 1 / rate_off)


def median_phases(per_rep):
    """[{phase: seconds per step}] per repetition -> {phase: median}."""
    return {name: median([rep[name] for rep in per_rep]) for name in per_rep[0]} if per_rep else {}


def ms(seconds):
    return fmt(None if seconds is None else seconds * 1e3)


def multiple(a, b):
    return "n/a" if a is None or not b else f"{a / b:.1f}x"


def paired_ratio(on, off):
    """Repetition k of one configuration over repetition k of the other, for each k: their median and each value."""
    each = [a / b for a, b in zip(on, off) if a is not None and b]
    if not each:
        return "n/a"
    return f"{statistics.median(each):.2f}x ({', '.join(f'{x:.2f}' for x in each)})"


def sync_cost_lines(pairs):
    """pairs: dicts with label, global_batch, on and off (side -> results of config_table's input), floor_s and
    floor_what. Sync cost per step beside its floor, and where each side's step time goes."""
    if not pairs:
        return []
    cost = ["Gradient sync cost per optimizer step (the step time with sync on less the one with sync off, from the "
            "medians; sync off = the same ranks as independent processes, so on / off is also the scaling "
            "efficiency: job samples/s / (ranks x one-rank samples/s)) and its floor; \"by repetition\": each "
            "repetition's sync-on run over the sync-off run of the same repetition (the configurations take turns "
            "within a repetition), their median and each:", "",
            "| configuration | ddptrain on / off | Python on / off | ddptrain sync ms | Python sync ms "
            "| floor ms | ddptrain / floor | Python / floor | ddptrain / Python sync "
            "| ddptrain on / off by repetition | Python on / off by repetition |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    phases = ["Where a step goes (ms per step, medians; ddptrain's own phase times, the ranks' mean; Python's rank 0 "
              "timed around forward + loss, backward - which with DDP ends when its all-reduces are done - and the "
              "optimizer step). \"hidden\": the part of the floor's transfer not left waiting after backward, "
              "1 - wait / floor.", "",
              "| configuration | ddptrain data / compute / all-reduce wait / optimizer | hidden | Python forward / "
              "backward with all-reduce / optimizer | Python sync off forward / backward / optimizer |",
              "| --- | --- | ---: | --- | --- |"]
    floors = []
    for p in pairs:
        rates = {side: (median(p["on"][side]["rates"]), median(p["off"][side]["rates"])) for side in p["on"]}
        sync = {side: sync_cost_per_step(p["global_batch"], *rates[side]) for side in rates}
        cost.append(f"| {p['label']} | {ratio(*rates['ddptrain'])} | {ratio(*rates['python'])} "
                    f"| {ms(sync['ddptrain'])} | {ms(sync['python'])} | {ms(p['floor_s'])} "
                    f"| {multiple(sync['ddptrain'], p['floor_s'])} | {multiple(sync['python'], p['floor_s'])} "
                    f"| {ratio(sync['ddptrain'], sync['python'])} "
                    f"| {paired_ratio(p['on']['ddptrain']['rates'], p['off']['ddptrain']['rates'])} "
                    f"| {paired_ratio(p['on']['python']['rates'], p['off']['python']['rates'])} |")
        d, py, py_off = (median_phases(p["on"]["ddptrain"]["phases"]), median_phases(p["on"]["python"]["phases"]),
                         median_phases(p["off"]["python"]["phases"]))
        wait = d.get("comm")
        hidden = "n/a" if wait is None or not p["floor_s"] else f"{max(0.0, 1 - wait / p['floor_s']) * 100:.0f}%"
        phases.append(f"| {p['label']} | {' / '.join(ms(v) for v in d.values())} | {hidden} "
                      f"| {' / '.join(ms(v) for v in py.values())} | {' / '.join(ms(v) for v in py_off.values())} |")
        floors.append(f"- {p['label']}: {p['floor_what']}")
    return cost + [""] + phases + ["", "Floors:", ""] + floors + [""]


BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
RUN_HEADER = """# {title}

A run of ddptrain's benchmarks, kept as it was written; how to read it and the current figures:
[bench/RESULTS.md](../../RESULTS.md).

"""


def suite_folder(key):
    """bench/results/ folder of a command's runs: its measuring arguments as a name (long ones cut, with a hash)."""
    slug = re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")
    if len(slug) > 60:
        slug = slug[:50].rstrip("-") + "-" + hashlib.sha1(key.encode()).hexdigest()[:8]
    return os.path.join(RESULTS_DIR, slug)


def run_file(key, day=None):
    """Where a run of `key` on `day` (YYYY-MM-DD, today in UTC by default) is kept: one file per suite and date."""
    day = day or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return os.path.join(suite_folder(key), f"{day}.md")


def keep_run(key, block, path=None):
    """Writes a run's block: into `path` when given (the block of the same key replaced, others kept), else into its
    suite's file of today under bench/results/, then lists it in RESULTS.md. Returns the file written."""
    if path:
        update_results_file(path, key, block)
        return path
    path = run_file(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    update_results_file(path, key, block, RUN_HEADER.format(title=key))
    update_runs_index(os.path.join(os.path.dirname(RESULTS_DIR), "RESULTS.md"))
    return path


def runs_index(results_dir=None):
    """RESULTS.md's list of the kept runs: each suite's newest run first, then its earlier dates."""
    results_dir = results_dir or RESULTS_DIR
    lines = []
    for folder in sorted(glob.glob(os.path.join(results_dir, "*/"))):
        if os.path.basename(folder[:-1]) == "analyses":  # written by hand, listed by RESULTS.md's contents
            continue
        runs = sorted(glob.glob(os.path.join(folder, "*.md")), reverse=True)
        if not runs:
            continue
        title = next((l[2:].strip() for l in open(runs[0]) if l.startswith("# ")), os.path.basename(folder[:-1]))
        rel = [os.path.relpath(r, os.path.dirname(results_dir)) for r in runs]
        dated = [f"[{os.path.basename(r)[:-3]}]({r})" for r in rel]
        lines.append(f"- {title}: {', '.join(dated)}")
    return lines


def update_runs_index(results_md, results_dir=None):
    """Rewrites the list between RESULTS.md's runs markers from the files under bench/results/."""
    begin, end = "<!-- BEGIN runs -->", "<!-- END runs -->"
    text = open(results_md).read()
    if begin not in text or end not in text:
        raise SystemExit(f"{results_md}: no {begin} ... {end} section to list the runs in")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    write_whole(results_md, head + begin + "\n" + "\n".join(runs_index(results_dir)) + "\n" + end + tail)


def listed_runs(results_md):
    """The lines between RESULTS.md's runs markers."""
    text = open(results_md).read()
    return text.split("<!-- BEGIN runs -->", 1)[1].split("<!-- END runs -->", 1)[0].strip().splitlines()


def write_whole(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:  # written whole, then renamed over the old file: never half a file
        f.write(text)
    os.replace(tmp, path)


def update_results_file(path, key, block, header=HEADER):
    """Replaces the block of this key in the file (or appends it)."""
    begin, end = f"<!-- BEGIN {key} -->", f"<!-- END {key} -->"
    text = open(path).read() if os.path.exists(path) else header
    new = f"{begin}\n{block.rstrip()}\n{end}\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    text = pattern.sub(lambda _: new, text) if pattern.search(text) else text.rstrip() + "\n\n" + new
    write_whole(path, text)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
