# The report of scripts/gpu-check, run with the Python that has torch (the GPU machine's /opt/torch/.venv/bin/python3):
#   report STATE BUILD OUT.md   writes OUT.md from what gpu-check left in STATE: the machine and versions, the GPU tests'
#                               results and figures (STATE/gpu-tests.xml, CTest's JUnit file) and the benchmark's
#                               goals and tables (STATE/bench-goals.tsv, STATE/bench.md)
import datetime
import os
import platform
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import torch

FIGURE = re.compile(r"^\[figure\] (.+?): (.*)$", re.M)


def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"({cmd[0]}: {e})"


def machine(state, build):
    import torchvision

    lines = [f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}"]
    gpus = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader")
    lines += [f"GPU: {g}" for g in gpus.splitlines()] or ["GPU: none (nvidia-smi)"]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0) / 2**20
    lines.append(f"CPU: {os.cpu_count()} x {cpu}; {mem:.0f} GiB RAM; {platform.platform()}")
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "n/a"
    lines.append(f"Python {sys.version.split()[0]} at {sys.executable}; torch {torch.__version__}, torchvision "
                 f"{torchvision.__version__}; CUDA {torch.version.cuda}, cuDNN {cudnn}, NCCL {nccl}")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = run("git", "-C", repo, "rev-parse", "--short", "HEAD") or "no git"
    if subprocess.run(["git", "-C", repo, "diff", "--quiet", "HEAD"], capture_output=True).returncode != 0:
        source += " (the working tree differs from that commit)"
    lines.append(f"source: {source}")
    if os.environ.get("GPU_CHECK_PREBUILT"):
        lines.append("build: made on another machine against the same LibTorch wheel (GPU_CHECK_PREBUILT); not rebuilt here")
    version = os.path.join(state, "version.txt")
    if os.path.exists(version):
        lines += [f"ddptrain --version: {l}" for l in open(version).read().splitlines()]
    libs = re.compile(r"libisal|libtomlplusplus|libjpeg|libpng|libcrypto|libz\.so|libtorch_cpu|libtorch_cuda|"
                      r"libnccl|libcudart|not found")
    lines += [f"ldd: {l.strip()}" for l in run("ldd", os.path.join(build, "ddptrain")).splitlines() if libs.search(l)]
    return ["## Machine", "", "```", *lines, "```", ""]


def gpu_tests(state):
    """(table rows, goal rows) from CTest's JUnit file: each test's result, time and the figures it printed."""
    path = os.path.join(state, "gpu-tests.xml")
    if not os.path.exists(path):
        return ["`ctest -L gpu` has not run."], []
    rows, goals = ["| test | result | time | figures |", "| --- | --- | --- | --- |"], []
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.get("status") == "fail":
            result = "failed"
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            result = "skipped"
        else:
            result = "passed"
        figures = FIGURE.findall(case.findtext("system-out") or "")
        shown = "; ".join(f"{n}: {v}" for n, v in figures) or "—"
        rows.append(f"| {case.get('name')} | **{result}** | {float(case.get('time', 0)):.1f} s | {shown} |")
        goals.append((f"`{case.get('name')}`", shown, {"passed": "met", "failed": "not met"}.get(result, "n/a")))
    return rows, goals


def report(state, build, out):
    rows, goals = gpu_tests(state)
    bench_goals = os.path.join(state, "bench-goals.tsv")
    if os.path.exists(bench_goals):
        goals += [tuple(l.rstrip("\n").split("\t")) for l in open(bench_goals) if l.strip()]
    bench = os.path.join(state, "bench.md")
    text = ["# ddptrain on a GPU (scripts/gpu-check)", "",
            "Written by `scripts/gpu-check` on the machine below; every figure is that run's measurement (logs in the",
            "run's `gpu-check.tar.gz`). The GPU tests are the CTest label `gpu` (`ctest -L gpu`): the Cuda instances",
            "of the acceptance, replica, AMP and restart tests, and the Cuda suites.", "",
            "## Goals", "", "| goal | figure | result |", "| --- | --- | --- |",
            *(f"| {g} | {f.replace('|', '/')} | **{v}** |" for g, f, v in goals), "",
            *machine(state, build), "## GPU tests (ctest -L gpu)", "", *rows, "",
            "## Side by side with Python (bench/gpu_bench.py)", "",
            open(bench).read() if os.path.exists(bench) else "bench/gpu_bench.py has not run."]
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(text).rstrip("\n") + "\n")
    os.replace(out + ".tmp", out)
    print(f"gpu-check: wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "report":
        raise SystemExit("usage: gpu_check.py report STATE BUILD OUT.md")
    report(*sys.argv[2:])
