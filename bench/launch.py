# Process launching for ddp_bench.py and gpu_bench.py: ranks under /usr/bin/time -v with a torchrun-style environment.
#
# Rank 0's stdout is timestamped (time to first optimizer step); peak RSS per rank.
import os
import re
import signal
import socket
import subprocess
import threading
import time

# Variables through which ddptrain or torch.distributed could find a job; removed before every launch.
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
             "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_COMM_WORLD_LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE")
FIRST_STEP_LINE = re.compile(r"\bstep 1/")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(threads, rank=None, world=None, port=None):
    """Environment of one rank; rank None = a standalone process with no distributed variables."""
    env = {k: v for k, v in os.environ.items() if k not in DIST_VARS}
    env["OMP_NUM_THREADS"] = str(threads)
    env["GLOO_SOCKET_IFNAME"] = "lo"
    if rank is not None:
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def max_rss_mib(time_output_path):
    try:
        with open(time_output_path) as f:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
    except FileNotFoundError:
        return None
    return int(m.group(1)) / 1024.0 if m else None


class RunError(RuntimeError):
    pass


def run_ranks(argvs, envs, work_dir, timeout_s, stop_after_first_step=False):
    """Starts one process per (argv, env), rank 0 first. Returns dict(first_step_s, rss_mib[], wall_s, stdout0).

    first_step_s: seconds from just before rank 0's launch to the moment rank 0 printed its step-1 line
    (None if it printed none). With stop_after_first_step the processes are killed at that moment.
    """
    procs, first_step = [], {}
    t0 = time.perf_counter()
    for rank, (argv, env) in enumerate(zip(argvs, envs)):
        rss_file = os.path.join(work_dir, f"time.rank{rank}.txt")
        # Without GNU time (a GPU machine's image may lack it) the run goes on and peak RSS is reported as n/a.
        cmd = (["/usr/bin/time", "-v", "-o", rss_file] if os.access("/usr/bin/time", os.X_OK) else []) + argv
        stdout = subprocess.PIPE if rank == 0 else open(os.path.join(work_dir, f"stdout.rank{rank}.txt"), "w")
        stderr = open(os.path.join(work_dir, f"stderr.rank{rank}.txt"), "w")
        procs.append(subprocess.Popen(cmd, env=env, cwd=work_dir, stdout=stdout, stderr=stderr, text=True,
                                      start_new_session=True))
    lines = []
    seen_first = threading.Event()

    def read_rank0():
        for line in procs[0].stdout:
            lines.append(line)
            if "t" not in first_step and FIRST_STEP_LINE.search(line):
                first_step["t"] = time.perf_counter() - t0
                seen_first.set()
        seen_first.set()

    reader = threading.Thread(target=read_rank0, daemon=True)
    reader.start()
    deadline = t0 + timeout_s
    if stop_after_first_step:
        seen_first.wait(timeout=max(0.0, deadline - time.perf_counter()))
        for p in procs:
            kill_group(p)
    try:
        codes = [p.wait(timeout=max(0.1, deadline - time.perf_counter())) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            kill_group(p)
        raise RunError(f"timed out after {timeout_s} s; outputs in {work_dir}")
    wall = time.perf_counter() - t0
    reader.join(timeout=5)
    stdout0 = "".join(lines)
    with open(os.path.join(work_dir, "stdout.rank0.txt"), "w") as f:
        f.write(stdout0)
    if not stop_after_first_step and any(codes):
        tails = []
        for rank, code in enumerate(codes):
            if code:
                with open(os.path.join(work_dir, f"stderr.rank{rank}.txt")) as f:
                    tails.append(f"rank {rank} exit {code}: " + f.read()[-1500:])
        raise RunError("\n".join(tails) + f"\nstdout rank 0:\n{stdout0[-1500:]}\noutputs in {work_dir}")
    if stop_after_first_step and "t" not in first_step:
        raise RunError(f"no 'step 1/' line from rank 0 (exit codes {codes}); outputs in {work_dir}\n{stdout0[-1500:]}")
    rss = [max_rss_mib(os.path.join(work_dir, f"time.rank{r}.txt")) for r in range(len(procs))]
    return {"first_step_s": first_step.get("t"), "rss_mib": rss, "wall_s": wall, "stdout0": stdout0}


def kill_group(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
