# torchvision's side of ddptrain's image_folder dataset (oracle for tests):
#   make ROOT --classes K --train N --val M --seed S [--learnable]   writes ROOT/{train,val}/class_k/*.png
#   list ROOT OUT.json        ImageFolder(ROOT)'s classes, class_to_idx and samples
#   transforms OUT_DIR         random uint8 images and what torchvision.transforms.v2 makes of them
#   train --data ROOT ...      Python DDP on ImageFolder(ROOT/train) with the evaluation transform (torchrun worker)
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import add_arguments, build_model, ddp_train_and_save  # noqa: E402

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]  # ddptrain's defaults for image_folder


def make_folder(args):
    """PNG images of 3 channels and varied sizes; --learnable draws each class in its own colour with a bar, else the
    pixels are noise."""
    from PIL import Image
    rng = np.random.default_rng(args.seed)
    palette = learnable_palette(args.classes) if args.learnable else None
    for split, count in (("train", args.train), ("val", args.val)):
        for k in range(args.classes):
            folder = os.path.join(args.root, split, "class_%02d" % k)
            os.makedirs(folder, exist_ok=True)
            for i in range(count):
                h, w = (int(v) for v in rng.integers(args.min_side, args.max_side + 1, size=2))
                if args.learnable:  # the class's colour with noise, a white bar across (odd) or down (even)
                    img = np.clip(rng.normal(palette[k], 30, size=(h, w, 3)), 0, 255).astype(np.uint8)
                    if k % 2:
                        img[h // 3: h // 2, :, :] = 255
                    else:
                        img[:, w // 3: w // 2, :] = 255
                else:
                    img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
                Image.fromarray(img, "RGB").save(os.path.join(folder, "img_%04d.png" % i))


def learnable_palette(classes):
    """One colour per class, far apart in hue and in brightness: the hues spread around the colour wheel, and the
    classes that share a bar direction (every second class) alternate between dark and bright, so that neither a
    colour augmentation that takes the saturation away nor one that shifts the hue leaves two classes alike."""
    import colorsys
    colours = []
    for k in range(classes):
        saturation, value = (0.9, 0.3) if (k // 2) % 2 == 0 else (0.5, 1.0)
        r, g, b = colorsys.hsv_to_rgb(k / classes, saturation, value)
        colours.append([round(255 * r), round(255 * g), round(255 * b)])
    return np.array(colours)


def list_folder(args):
    from torchvision.datasets import ImageFolder
    ds = ImageFolder(args.root)
    with open(args.out, "w") as f:
        json.dump({"classes": ds.classes, "class_to_idx": ds.class_to_idx,
                   "samples": [[p, t] for p, t in ds.samples]}, f)


def transforms(args):
    """For each case: the source image (HWC bytes) and torchvision's output (CHW bytes). Resize(r) + CenterCrop(s),
    and RandomResizedCrop(s) + RandomHorizontalFlip() with the global generator seeded first; bilinear, and some
    cases bicubic ("interp")."""
    from torchvision.transforms import v2
    bicubic = v2.InterpolationMode.BICUBIC
    rng = np.random.default_rng(0)
    cases = []
    for n, (h, w) in enumerate([(37, 53), (64, 48), (120, 91), (33, 33), (300, 20)]):
        img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        img.tofile(os.path.join(args.out, "src_%d.rgb" % n))
        chw = torch.from_numpy(img).permute(2, 0, 1)  # PILToTensor's layout
        for size, resize in ((16, 18), (24, 32), (32, 32)):
            out = v2.CenterCrop(size)(v2.Resize(resize)(chw))
            name = "eval_%d_%d_%d.rgb" % (n, size, resize)
            out.contiguous().numpy().tofile(os.path.join(args.out, name))
            cases.append({"kind": "eval", "src": n, "h": h, "w": w, "size": size, "resize": resize, "out": name})
        for seed in (0, 1, 12345, 2**63 + 11):
            torch.manual_seed(seed)
            out = v2.Compose([v2.RandomResizedCrop(24), v2.RandomHorizontalFlip()])(chw)
            name = "train_%d_%d.rgb" % (n, seed % 100000)
            out.contiguous().numpy().tofile(os.path.join(args.out, name))
            cases.append({"kind": "train", "src": n, "h": h, "w": w, "size": 24, "seed": seed, "out": name})
        out = v2.CenterCrop(20)(v2.Resize(27, interpolation=bicubic)(chw))
        name = "eval_bicubic_%d.rgb" % n
        out.contiguous().numpy().tofile(os.path.join(args.out, name))
        cases.append({"kind": "eval", "src": n, "h": h, "w": w, "size": 20, "resize": 27, "out": name,
                      "interp": "bicubic"})
        torch.manual_seed(n)
        out = v2.Compose([v2.RandomResizedCrop(24, interpolation=bicubic), v2.RandomHorizontalFlip()])(chw)
        name = "train_bicubic_%d.rgb" % n
        out.contiguous().numpy().tofile(os.path.join(args.out, name))
        cases.append({"kind": "train", "src": n, "h": h, "w": w, "size": 24, "seed": n, "out": name,
                      "interp": "bicubic"})
    with open(os.path.join(args.out, "cases.json"), "w") as f:
        json.dump(cases, f)


def train(args):
    import torch.distributed as dist
    import torch.nn.functional as F
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    # The evaluation transform on tensors (torchvision v2), with ToTensor's division then Normalize.
    transform = v2.Compose([v2.PILToTensor(), v2.Resize(args.resize), v2.CenterCrop(args.size),
                            v2.Lambda(lambda x: x.to(torch.float32).div(255)),
                            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    ds = ImageFolder(os.path.join(args.data, "train"), transform=transform)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.tensor(ds.targets, dtype=torch.int64)
    model = build_model(args.model, in_channels=3, num_classes=len(ds.classes))
    model.load_state_dict(torch.load(args.init))
    ddp_train_and_save(model, x, y, args, F.cross_entropy)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("root")
    add_arguments(p, [("classes", int, 3), ("train", int, 4), ("val", int, 2), ("seed", int, 0),
                      ("min_side", int, 24), ("max_side", int, 48)])
    p.add_argument("--learnable", action="store_true")
    p = sub.add_parser("list")
    p.add_argument("root")
    p.add_argument("out")
    p = sub.add_parser("transforms")
    p.add_argument("out")
    p = sub.add_parser("train")
    add_arguments(p, [("data", str, None), ("init", str, None), ("out", str, None), ("batch", int, 8),
                      ("steps", int, 4), ("lr", float, 0.05), ("momentum", float, 0.9), ("seed", int, 0),
                      ("threads", int, 1), ("model", str, "resnet18"), ("size", int, 32), ("resize", int, 36)])
    args = parser.parse_args()
    {"make": make_folder, "list": list_folder, "transforms": transforms, "train": train}[args.command](args)


if __name__ == "__main__":
    main()
