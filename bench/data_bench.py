# Image-folder input pipeline: ddptrain's training loader (as a CPU rank configures it from [data]) vs
# DataLoader(ImageFolder, num_workers=N) with torchvision v2 transforms: images/s, CPU-seconds per image and peak RSS
# of the whole side (workers included), alternating, medians.
#
# Run with the project venv's Python after building build/ddp_data_pipeline. See bench/README.md.
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
# Where README's recipe for bench/requirements-dali.txt puts its venv.
DALI_PYTHON = os.path.expanduser("~/.cache/ddptrain/dali-venv/bin/python")


def make_folder(root, count, classes, width, height, quality, seed=0):
    """ImageNet-like JPEGs: smooth random fields with edges (compress like photos, unlike noise)."""
    import numpy as np
    from PIL import Image
    marker = os.path.join(root, f".complete-{count}-{classes}-{width}x{height}-q{quality}")
    if os.path.exists(marker):
        return
    rng = np.random.default_rng(seed)
    for i in range(count):
        folder = os.path.join(root, "train", "class_%02d" % (i % classes))
        os.makedirs(folder, exist_ok=True)
        small = rng.integers(0, 256, size=(height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((width, height), Image.BILINEAR)
        arr = np.asarray(img).copy()
        y, x = (int(v) for v in rng.integers(0, min(width, height) // 2, size=2))
        arr[y:y + height // 4, x:x + width // 4] = rng.integers(0, 256, size=3)
        Image.fromarray(arr).save(os.path.join(folder, "img_%05d.jpg" % i), quality=quality)
    for k in range(classes):  # a val/ with the same classes (ddptrain's image_folder reads both)
        folder = os.path.join(root, "val", "class_%02d" % k)
        os.makedirs(folder, exist_ok=True)
        Image.new("RGB", (width, height)).save(os.path.join(folder, "v.jpg"))
    open(marker, "w").close()


def process_cpu_s(pid):
    """User + system CPU seconds of one process so far (all its threads), from /proc; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def dataloader_side(args):
    """Runs inside its own process: DataLoader over ImageFolder, prints the JSON line the harness reads."""
    import torch
    from torchvision import datasets
    from torchvision.transforms import v2
    torch.set_num_threads(args.threads)
    if args.transforms == "pil":  # torchvision's reference recipe: crop and flip on the PIL image, then to tensor
        ops = [v2.RandomResizedCrop(args.size), v2.RandomHorizontalFlip(), v2.PILToTensor()]
    else:  # to a uint8 tensor first, then crop and resize in ATen (the kernels ddptrain uses)
        ops = [v2.PILToTensor(), v2.RandomResizedCrop(args.size), v2.RandomHorizontalFlip()]
    transform = v2.Compose(ops + [v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    ds = datasets.ImageFolder(os.path.join(args.root, "train"), transform=transform)
    g = torch.Generator().manual_seed(0)
    n = min(len(ds), (args.batches + 2 * args.skip) * args.batch)
    subset = torch.utils.data.Subset(ds, torch.randperm(len(ds), generator=g)[:n].tolist())
    loader = torch.utils.data.DataLoader(subset, batch_size=args.batch, num_workers=args.workers,
                                         prefetch_factor=2 if args.workers else None)
    time_loader(iter(loader), args)


def time_loader(it, args):
    """Reads args.skip batches of (images, labels) from `it` (the workers' start-up and the batches they assembled
    ahead meanwhile), then times args.batches more; prints the JSON line the harness reads, the CPU time of this
    process and its worker processes."""
    for _ in range(args.skip):
        next(it)
    side = tree_pids(os.getpid())  # this process and its worker processes
    cpu_start = sum(process_cpu_s(p) for p in side)
    start = time.perf_counter()
    images = 0
    for x, _ in itertools.islice(it, args.batches):
        images += x.shape[0]
    seconds = time.perf_counter() - start
    cpu = sum(process_cpu_s(p) for p in side) - cpu_start
    print(json.dumps({"images_per_s": images / seconds, "cpu_s_per_image": cpu / images, "images": images,
                      "seconds": seconds}))


def dali_side(args):
    """Runs inside its own process, with a Python that has NVIDIA DALI (bench/requirements-dali.txt): DALI's CPU
    pipeline (device_id=None) doing the same work with `workers` threads - file reader, decoders.image_random_crop
    (RandomResizedCrop's area and ratio ranges), resize, crop_mirror_normalize with a coin-flip mirror - prints the
    JSON line the harness reads."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=args.batch, num_threads=args.workers, device_id=None, seed=0)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=os.path.join(args.root, "train"), random_shuffle=True)
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_x=args.size, resize_y=args.size)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[255 * m for m in IMAGENET_MEAN], std=[255 * s for s in IMAGENET_STD],
                                          mirror=fn.random.coin_flip())
        return images, labels

    pipe = pipeline()
    pipe.build()
    for _ in range(args.skip):  # the threads' start-up and the batches they assembled ahead meanwhile
        pipe.run()
    cpu_start = time.process_time()
    start = time.perf_counter()
    images = 0
    for _ in range(args.batches):
        out, _ = pipe.run()
        images += len(out)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    print(json.dumps({"images_per_s": images / seconds, "cpu_s_per_image": cpu / images, "images": images,
                      "seconds": seconds}))


def tree_pids(pid):
    """A process and all its descendants, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def tree_rss_kib(pid):
    """Resident set size of a process and all its descendants (KiB), from /proc."""
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def run_side(cmd):
    """Runs one side, polling the RSS of its whole process tree; returns its JSON line and the peak in MiB."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_kib(proc.pid))
        time.sleep(0.02)
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {err.strip()[-2000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mib"] = peak / 1024
    return result


def augmented_side(args):
    return f"ddptrain ({args.auto_augment}, erase {args.random_erase})"


def add_folder_arguments(p):
    """The generated image folder's flags (make_folder's arguments) and the crop size."""
    p.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "ddptrain_data_bench"))
    p.add_argument("--images", type=int, default=4000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--width", type=int, default=500)
    p.add_argument("--height", type=int, default=375)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--size", type=int, default=224)


def main():
    p = argparse.ArgumentParser()
    add_folder_arguments(p)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--workers", default="1,2,8")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--transforms", default="pil,tensor", help="DataLoader recipes to run: pil, tensor")
    p.add_argument("--auto-augment", default="ta_wide",
                   help="a ddptrain side with this data.auto_augment policy (and --random-erase) besides the standard "
                        "augmentation; none: no such side")
    p.add_argument("--random-erase", type=float, default=0.25, help="that side's data.random_erase")
    p.add_argument("--dali-python", default=DALI_PYTHON,
                   help="a Python with NVIDIA DALI (bench/requirements-dali.txt) for the DALI CPU side; left out when "
                        "it does not exist")
    p.add_argument("--skip", type=int, default=1, help=argparse.SUPPRESS)  # set per worker count by the harness
    p.add_argument("--side", choices=["dataloader", "dali"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        args.workers = int(args.workers)
        return dataloader_side(args) if args.side == "dataloader" else dali_side(args)

    make_folder(args.root, args.images, args.classes, args.width, args.height, args.quality)
    native = os.path.join(REPO, "build", "ddp_data_pipeline")
    rows, skips = [], {}
    for workers in (int(w) for w in args.workers.split(",")):
        # Batches read before the timed ones and after them: more than either side holds ahead (DataLoader's
        # prefetch_factor of 2 per worker, ddptrain's data.prefetch of 4), so that the timed batches are all
        # assembled in the window and the pipeline is as full at its end as at its start.
        # A folder too small for that gets fewer (at least 1, the threads' or processes' start).
        skip = skips[workers] = max(1, min(2 * workers + 2, (args.images // args.batch - args.batches) // 2))
        common = ["--batch", str(args.batch), "--batches", str(args.batches), "--skip", str(skip), "--size",
                  str(args.size), "--threads", str(args.threads)]
        sides = {"ddptrain": [native, args.root, "--workers", str(workers)] + common}
        if args.auto_augment != "none":
            sides[augmented_side(args)] = sides["ddptrain"] + ["--auto-augment", args.auto_augment, "--random-erase",
                                                               str(args.random_erase)]
        for recipe in args.transforms.split(","):
            sides[f"DataLoader ({recipe})"] = [sys.executable, os.path.abspath(__file__), "--side", "dataloader",
                                               "--root", args.root, "--workers", str(workers),
                                               "--transforms", recipe] + common
        if os.path.exists(args.dali_python):
            sides["DALI CPU"] = [args.dali_python, os.path.abspath(__file__), "--side", "dali", "--root", args.root,
                                 "--workers", str(workers)] + common
        runs = {name: [] for name in sides}
        for _ in range(args.reps):  # alternating, so drift in the machine's load hits every side alike
            for name, cmd in sides.items():
                runs[name].append(run_side(cmd))
        for name, results in runs.items():
            rows.append(dict(workers=workers, side=name,
                             rates=[r["images_per_s"] for r in results],
                             rate=statistics.median(r["images_per_s"] for r in results),
                             cpu=statistics.median(r["cpu_s_per_image"] for r in results),
                             prefetch=results[0].get("prefetch"),
                             rss=statistics.median(r["peak_rss_mib"] for r in results)))
    prefetch = next(r["prefetch"] for r in rows if r["side"] == "ddptrain")
    skipped = ", ".join(f"{n} for {w} worker(s)" for w, n in skips.items())
    print(f"{args.images} JPEGs {args.width}x{args.height} q{args.quality}, {args.classes} classes; "
          f"RandomResizedCrop({args.size}) + flip + normalize, batch {args.batch}, {args.batches} batches timed "
          f"between as many read before and after them ({skipped}), {args.threads} intra-op thread(s), "
          f"{args.reps} alternating repetitions, medians; "
          f"ddptrain's loader as a CPU rank configures it (data.prefetch = {prefetch}), DataLoader with "
          f"prefetch_factor 2; {len(os.sched_getaffinity(0))} CPUs")
    if not os.path.exists(args.dali_python):
        print(f"(no DALI side: {args.dali_python} does not exist; see bench/README.md)")
    print("| workers | side | images/s (reps) | median | vs best DataLoader | vs DALI CPU | peak RSS MiB (whole side) "
          "| RSS vs DataLoader | CPU s/image | CPU vs DataLoader |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        peers = [r for r in rows if r["workers"] == row["workers"] and r["side"].startswith("DataLoader")]
        best = max(peers, key=lambda r: r["rate"]) if peers else None
        dali = next((r for r in rows if r["workers"] == row["workers"] and r["side"] == "DALI CPU"), None)
        ratio = f"{row['rate'] / best['rate']:.2f}x" if best else ""
        vs_dali = f"{row['rate'] / dali['rate']:.2f}x" if dali else ""
        rss = f"{row['rss'] / best['rss']:.2f}x" if best else ""
        # A tiny run's CPU time can fall below the clock's resolution (a tick of the process's CPU clock): no ratio.
        cpu = f"{row['cpu'] / best['cpu']:.2f}x" if best and best["cpu"] > 0 else ("n/a" if best else "")
        print(f"| {row['workers']} | {row['side']} | {', '.join('%.0f' % r for r in row['rates'])} | "
              f"{row['rate']:.0f} | {ratio} | {vs_dali} | {row['rss']:.0f} | {rss} | {row['cpu']:.5f} | {cpu} |")
    for row in rows:  # the policy's and the erasing's cost: images/s against the standard augmentation's
        if row["side"] == augmented_side(args):
            standard = next(r for r in rows if r["workers"] == row["workers"] and r["side"] == "ddptrain")
            print(f"{row['workers']} worker(s): ddptrain with data.auto_augment = \"{args.auto_augment}\", "
                  f"data.random_erase = {args.random_erase}: {row['rate'] / standard['rate']:.2f}x the images/s of the "
                  f"standard augmentation")


if __name__ == "__main__":
    main()
