# Tar shards: ddptrain's training loader (as a CPU rank configures it from [data]) over the same JPEGs as an image
# folder, as shards on local disk and as shards served by nginx over HTTP (loopback, and with --link-rates over a
# link shaped with tc-tbf between two network namespaces), against webdataset.WebDataset + DataLoader on the same
# shards: images/s, CPU-seconds per image and peak RSS of every side, alternating, medians. Then the start to the
# epoch's order for a dataset of --start-samples in --start-shards (sparse shards, real indexes) beside image_folder's
# walk over as many files.
#
# Run with the project venv's Python after building build/ddptrain and build/ddp_data_pipeline; the HTTP sides need
# nginx, the shaped link root. See bench/README.md.
import argparse
import glob
import json
import os
import shlex
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import report  # noqa: E402
from data_bench import (IMAGENET_MEAN, IMAGENET_STD, add_folder_arguments, make_folder, run_side,  # noqa: E402
                        time_loader)


def webdataset_side(args):
    """Runs inside its own process: webdataset.WebDataset (shard shuffle, shuffle buffer, PIL decode, the same
    RandomResizedCrop + flip + normalize) in a DataLoader with `workers` processes; prints the JSON line the harness
    reads."""
    import torch
    import webdataset as wds
    from torchvision.transforms import v2
    torch.set_num_threads(args.threads)
    transform = v2.Compose([v2.RandomResizedCrop(args.size), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    ds = (wds.WebDataset(args.pattern, shardshuffle=100, seed=0, empty_check=False).repeat(4)
          .shuffle(args.shuffle_buffer).decode("pil").to_tuple("jpg;jpeg;png", "cls").map_tuple(transform, int)
          .batched(args.batch, partial=False))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=args.workers,
                                         prefetch_factor=2 if args.workers else None)
    time_loader(iter(loader), args)


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Nginx:
    """nginx serving `root` on host:port, one worker, in the foreground; `wrap` runs it in a namespace."""

    def __init__(self, root, host="127.0.0.1", wrap=lambda argv: argv):
        self.dir = tempfile.mkdtemp(prefix="ddptrain_shard_bench_nginx")
        self.port = free_port() if host == "127.0.0.1" else 8080
        self.url = f"http://{host}:{self.port}/"
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"daemon off;\nmaster_process off;\nerror_log {self.dir}/error.log;\npid {self.dir}/pid;\n"
                    f"events {{ worker_connections 1024; }}\nhttp {{ access_log off; sendfile on;\n"
                    f"  server {{ listen {host}:{self.port}; root {root}; }} }}\n")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen(wrap([nginx, "-e", os.path.join(self.dir, "error.log"), "-c", conf]))
        for _ in range(100):
            ok = subprocess.run(wrap(["curl", "-s", "-o", "/dev/null", self.url]), capture_output=True).returncode
            if ok == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("nginx did not start: " + open(os.path.join(self.dir, "error.log")).read())

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_shards(root, size_mb):
    """The image folder packed by ddptrain --make-shards into root/shards; the train pattern and the shard bytes."""
    out = os.path.join(root, f"shards-{size_mb}mb")
    if not os.path.exists(os.path.join(out, ".complete")):
        shutil.rmtree(out, ignore_errors=True)
        conf = os.path.join(root, "convert.toml")
        with open(conf, "w") as f:
            f.write(f'[model]\nname = "resnet18"\n[data]\ndataset = "image_folder"\ndir = "{root}"\n')
        subprocess.run([os.path.join(REPO, "build", "ddptrain"), conf, "--make-shards", out, "--shard-size",
                        str(size_mb)], check=True, capture_output=True)
        open(os.path.join(out, ".complete"), "w").close()
    tars = sorted(glob.glob(os.path.join(out, "train-*.tar")))
    pattern = "train-{%06d..%06d}.tar" % (0, len(tars) - 1)
    return out, pattern, sum(os.path.getsize(t) for t in tars)


def write_sparse_dataset(root, samples, shards):
    """`shards` sparse tar files with real indexes (ddptrain's DDPSHIX1 format, data/shard_index.h) holding `samples`
    samples in all, keys "class_KKKK/img_NNNNNNNN", 110 KB a sample; the pattern."""
    marker = os.path.join(root, f".complete-{samples}-{shards}")
    pattern = os.path.join(root, "train-{%06d..%06d}.tar" % (0, shards - 1))
    if os.path.exists(marker):
        return pattern
    os.makedirs(root, exist_ok=True)
    per, extra = divmod(samples, shards)
    first = 0
    for s in range(shards):
        n = per + (s < extra)
        keys = b"".join(b"class_%04d/img_%08d" % ((first + i) % 1000, first + i) for i in range(n))
        key_len = len(keys) // n if n else 0
        sample_bytes = 110 * 1024
        shard_bytes = n * sample_bytes + 1024
        head = b"DDPSHIX1" + struct.pack("<QQQQ", shard_bytes, 0, n, len(keys))
        rows = b"".join(struct.pack("<qqqQ", i * sample_bytes, sample_bytes, (first + i) % 1000, (i + 1) * key_len)
                        for i in range(n))
        path = os.path.join(root, "train-%06d.tar" % s)
        with open(path + ".ddpidx", "wb") as f:
            f.write(head + rows + keys)
        with open(path, "wb") as f:
            f.truncate(shard_bytes)
        first += n
    open(marker, "w").close()
    return pattern


def write_empty_folder(root, files, classes=1000):
    """An image folder of `files` empty .jpg files in `classes` class folders (image_folder's walk reads names only)."""
    marker = os.path.join(root, f".complete-{files}")
    if os.path.exists(marker):
        return
    for split in ("train", "val"):
        for k in range(classes):
            os.makedirs(os.path.join(root, split, "class_%04d" % k), exist_ok=True)
    for i in range(files):
        open(os.path.join(root, "train", "class_%04d" % (i % classes), "img_%08d.jpg" % i), "w").close()
    for k in range(classes):
        open(os.path.join(root, "val", "class_%04d" % k, "v.jpg"), "w").close()
    open(marker, "w").close()


def drop_page_cache():
    """Writes dirty pages back and drops the clean ones (Linux's vm.drop_caches; root), so that the next run reads its
    files from the disk."""
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        sys.exit(f"--page-cache cold needs root to drop the page cache: {e}")


def timed_plan(cmd, reps):
    """Wall seconds from launching `cmd` (data_pipeline --plan-only) to its exit, and its peak RSS: medians."""
    walls, rss = [], []
    for _ in range(reps):
        start = time.perf_counter()
        result = run_side(cmd)
        walls.append(time.perf_counter() - start)
        rss.append(result["peak_rss_mib"])
    return statistics.median(walls), statistics.median(rss), result


def main():
    p = argparse.ArgumentParser()
    add_folder_arguments(p)
    p.add_argument("--shard-size", type=int, default=16, help="MB a shard (ddptrain --make-shards --shard-size)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--shuffle-buffer", type=int, default=1000)
    p.add_argument("--in-flight", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--link-rates", default="",
                   help="comma-separated tc rates (e.g. 1gbit,100mbit): HTTP sides over a link shaped to each, "
                        "nginx in one network namespace, the loader in the other (root)")
    p.add_argument("--start-samples", type=int, default=1281167, help="0: no start-up comparison")
    p.add_argument("--start-shards", type=int, default=1024)
    p.add_argument("--start-root", default=os.path.join(tempfile.gettempdir(), "ddptrain_shard_bench_start"))
    p.add_argument("--page-cache", choices=["warm", "cold"], default="warm",
                   help="cold: the page cache dropped before every timed run (root), so that the folder's files and "
                        "the shards come from the disk, as for a dataset larger than the node's memory")
    p.add_argument("--results", help="write the block into this file instead of bench/results/")
    p.add_argument("--skip", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--side", choices=["webdataset"], help=argparse.SUPPRESS)
    p.add_argument("--pattern", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        args.workers = int(args.workers)
        return webdataset_side(args)

    machine = report.machine_description(REPO)
    date, load_start = report.now_utc(), report.load_average()
    make_folder(args.root, args.images, args.classes, args.width, args.height, args.quality)
    shard_dir, pattern, shard_bytes = make_shards(args.root, args.shard_size)
    bytes_per_image = shard_bytes / len(glob.glob(os.path.join(args.root, "train", "*", "*")))
    native = os.path.join(REPO, "build", "ddp_data_pipeline")
    lines = []
    say = lines.append
    servers, links, rows = [], [], []
    have_nginx = bool(shutil.which("nginx") or os.path.exists("/usr/sbin/nginx"))
    try:
        if have_nginx:
            servers.append(("HTTP loopback", Nginx(args.root)))
        for rate in filter(None, args.link_rates.split(",")):
            from netns import ADDRESSES, ShapedLink
            link = ShapedLink(rate, delay_ms=0)
            link.__enter__()
            links.append(link)
            servers.append((f"HTTP over {rate}", Nginx(args.root, ADDRESSES[0], lambda argv, l=link: l.wrap(0, argv))))
        for workers in (int(w) for w in args.workers.split(",")):
            skip = max(1, min(2 * workers + 2, (args.images // args.batch - args.batches) // 2))
            common = ["--batch", str(args.batch), "--batches", str(args.batches), "--skip", str(skip), "--size",
                      str(args.size), "--threads", str(args.threads), "--workers", str(workers)]
            shard_args = ["--shuffle-buffer", str(args.shuffle_buffer), "--in-flight", str(args.in_flight)]
            sides = {
                "ddptrain image folder": ([native, args.root] + common, None),
                "ddptrain shards, disk": ([native, "shards:" + os.path.join(shard_dir, pattern)] + common + shard_args,
                                          None),
            }
            for name, server in servers:
                url = server.url + os.path.relpath(shard_dir, args.root) + "/" + pattern
                link = next((l for l in links if name.endswith(l.rate)), None)
                cmd = [native, "shards:" + url] + common + shard_args
                sides["ddptrain shards, " + name] = (link.wrap(1, cmd) if link else cmd, link)
            sides["webdataset + DataLoader"] = (
                [sys.executable, os.path.abspath(__file__), "--side", "webdataset", "--pattern",
                 os.path.join(shard_dir, pattern), "--shuffle-buffer", str(args.shuffle_buffer)] + common, None)
            runs = {name: [] for name in sides}
            for _ in range(args.reps):  # alternating, so drift in the machine's load hits every side alike
                for name, (cmd, _) in sides.items():
                    if args.page_cache == "cold":
                        drop_page_cache()
                    runs[name].append(run_side(cmd))
            for name, results in runs.items():
                link = sides[name][1]
                rows.append(dict(workers=workers, side=name, link=link,
                                 rates=[r["images_per_s"] for r in results],
                                 rate=statistics.median(r["images_per_s"] for r in results),
                                 cpu=statistics.median(r["cpu_s_per_image"] for r in results),
                                 rss=statistics.median(r["peak_rss_mib"] for r in results)))
    finally:
        for _, server in servers:
            server.close()
        for link in links:
            link.__exit__(None, None, None)

    say(f"{args.images} JPEGs {args.width}x{args.height} q{args.quality} ({bytes_per_image / 1024:.0f} KiB a sample "
          f"in shards of {args.shard_size} MB); RandomResizedCrop({args.size}) + flip + normalize, batch {args.batch}, "
          f"{args.batches} batches timed, {args.threads} intra-op thread(s), {args.reps} alternating repetitions, "
          f"medians; shuffle buffer {args.shuffle_buffer}, {args.in_flight} shards in flight; "
          + ("page cache dropped before every run (every image read from the disk); " if args.page_cache == "cold"
             else "the page cache as the runs leave it (after the first, the images come from memory); ") +
          f"{len(os.sched_getaffinity(0))} CPUs" + ("" if have_nginx else "; no nginx: no HTTP side"))
    say("| workers | side | images/s (reps) | median | vs image folder | vs shards on disk | vs webdataset "
          "| MB/s read | of the link | peak RSS MiB | CPU s/image |")
    say("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        peer = {r["side"]: r for r in rows if r["workers"] == row["workers"]}
        ratio = lambda name: report.times(row['rate'] / peer[name]['rate']) if name in peer else ""  # noqa: E731
        mbps = row["rate"] * bytes_per_image / 1e6
        of_link = f"{mbps * 8e6 / row['link'].bits_per_s:.2f}" if row["link"] else ""
        say(f"| {row['workers']} | {row['side']} | {', '.join('%.0f' % r for r in row['rates'])} | {row['rate']:.0f} "
              f"| {ratio('ddptrain image folder')} | {ratio('ddptrain shards, disk')} | "
              f"{ratio('webdataset + DataLoader')} | {mbps:.1f} | {of_link} | {row['rss']:.0f} | {row['cpu']:.5f} |")
    for link in links:
        say(f"link {link.rate}: {link.description()}")

    if args.start_samples:
        pattern = write_sparse_dataset(args.start_root, args.start_samples, args.start_shards)
        folder = os.path.join(args.start_root, "folder")
        write_empty_folder(folder, args.start_samples)
        index_bytes = sum(os.path.getsize(f) for f in glob.glob(os.path.join(args.start_root, "*.ddpidx")))
        shards_s, shards_rss, r = timed_plan([native, "shards:" + pattern, "--plan-only", "true"], args.reps)
        folder_s, folder_rss, _ = timed_plan([native, folder, "--plan-only", "true"], args.reps)
        small = write_sparse_dataset(args.start_root + "-small", 1000, 1)
        small_s, small_rss, _ = timed_plan([native, "shards:" + small, "--plan-only", "true"], args.reps)
        say(f"\nstart to the epoch's order planned (process start, LibTorch loaded, dataset loaded, epoch ordered), "
              f"{args.reps} repetitions, medians:")
        say("| dataset | samples | seconds | peak RSS MiB |")
        say("| --- | --- | --- | --- |")
        say(f"| shards: {r['shards']} indexes ({index_bytes / 1e6:.0f} MB) | {r['samples']} | {shards_s:.2f} | "
              f"{shards_rss:.0f} |")
        say(f"| shards: 1 index | 1000 | {small_s:.2f} | {small_rss:.0f} |")
        say(f"| image_folder walk | {args.start_samples} | {folder_s:.2f} | {folder_rss:.0f} |")

    block = "\n".join(lines)
    print(block)
    measuring = [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                 if k not in ("results", "skip", "side", "pattern", "root", "start_root") and v != p.get_default(k)]
    key = " ".join(["shard_bench"] + measuring)
    header = (f"Run {date}. Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']} RAM; commit "
              f"{machine['ddptrain_commit']}. Load average at start {load_start}, at end {report.load_average()}.")
    invocation = ".venv/bin/python bench/shard_bench.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    print("kept in", report.keep_run(key, "\n".join([f"## `{invocation.strip()}`", "", header, "", block]),
                                     args.results))


if __name__ == "__main__":
    main()
