# Reference outputs of torchvision 0.26's automatic augmentation ops, policies, ColorJitter and RandomErasing on
# generated images.
"""Usage: auto_augment_reference.py ops|policies|erasing|jitter OUTDIR

Images are generated here (uint8 [C, H, W], odd and square sizes) and written raw as OUTDIR/NAME.chw. Each mode
writes OUTDIR/cases.json, a list of cases, and each case's output raw (uint8 [C, H, W], or float32 for erasing):

  ops       torchvision.transforms.v2.functional's op at fixed parameters ("fn": affine, rotate, adjust_*, posterize,
            solarize, autocontrast, equalize, invert), and _apply_image_or_video_transform(op, magnitude) ("fn":
            aug_op), the policies' mapping of a magnitude to the op's parameters.
  policies  torch.manual_seed(seed), then the v2 policy on the image: its output, the (op, magnitude) pairs it applied
            and the next torch.randint(2**31, ()) (the generator's state after the forward's draws).
  erasing   torch.manual_seed(seed), then v2.RandomErasing(p, value=0) on a [3, H, W] image: the box make_params drew
            (none: kept whole) and the next torch.randint(2**31, ()); and F.erase at fixed boxes on a float image.
  jitter    torch.manual_seed(seed), then v2.ColorJitter(brightness, contrast, saturation, hue) on the image: its
            output and the next torch.randint(2**31, ()).

One intra-op thread, as ddptrain's loader threads run these ops.
"""
import json
import math
import os
import sys

import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F
from torchvision.transforms.v2 import AutoAugmentPolicy, InterpolationMode

torch.set_num_threads(1)


def image(c, h, w, seed, low=0, high=255):
    """Smooth gradients with noise between low and high; channel 2 of a "flat" image is one value."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(h, dtype=torch.float64)[:, None]
    x = torch.arange(w, dtype=torch.float64)[None, :]
    chans = []
    for k in range(c):
        base = 0.5 + 0.5 * torch.sin(x * (0.21 + 0.07 * k) + y * (0.13 - 0.05 * k) + k)
        noise = torch.rand(h, w, generator=g, dtype=torch.float64) * 0.25 - 0.125
        chans.append((low + (high - low) * (base + noise).clamp(0, 1)).round())
    return torch.stack(chans).to(torch.uint8)


IMAGES = {
    "odd": image(3, 37, 23, 1),
    "square": image(3, 32, 32, 2),
    "low": image(3, 17, 29, 3, low=96, high=150),
}
IMAGES["low"][2] = 77  # a constant channel: autocontrast's and equalize's degenerate case


def write(outdir, name, t):
    with open(os.path.join(outdir, name), "wb") as f:
        f.write(t.contiguous().numpy().tobytes())


def write_images(outdir):
    for name, img in IMAGES.items():
        write(outdir, name + ".chw", img)


NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR
INTERP = {"nearest": NEAREST, "bilinear": BILINEAR}


def functional(case, img):
    fn = case["fn"]
    if fn == "affine":
        return F.affine(img, angle=case["angle"], translate=case["translate"], scale=case["scale"],
                        shear=case["shear"], interpolation=INTERP[case["interp"]], center=case["center"])
    if fn == "rotate":
        return F.rotate(img, angle=case["angle"], interpolation=INTERP[case["interp"]])
    if fn == "aug_op":
        t = v2.TrivialAugmentWide(interpolation=INTERP[case["interp"]])
        return t._apply_image_or_video_transform(img, case["op"], case["magnitude"], interpolation=t.interpolation,
                                                 fill=t._fill)
    arg = case.get("arg")
    return {
        "brightness": lambda: F.adjust_brightness(img, arg),
        "saturation": lambda: F.adjust_saturation(img, arg),
        "contrast": lambda: F.adjust_contrast(img, arg),
        "sharpness": lambda: F.adjust_sharpness(img, arg),
        "hue": lambda: F.adjust_hue(img, arg),
        "posterize": lambda: F.posterize(img, int(arg)),
        "solarize": lambda: F.solarize(img, arg),
        "autocontrast": lambda: F.autocontrast(img),
        "equalize": lambda: F.equalize(img),
        "invert": lambda: F.invert(img),
    }[fn]()


def op_cases():
    cases = []
    shear = math.degrees(math.atan(0.3))
    for interp in ("nearest", "bilinear"):
        for angle, translate, scale, sh, center in [
            (0.0, [0, 0], 1.0, [shear, 0.0], [0, 0]),
            (0.0, [0, 0], 1.0, [-shear, 0.0], [0, 0]),
            (0.0, [0, 0], 1.0, [0.0, shear], [0, 0]),
            (0.0, [0, 0], 1.0, [0.0, -44.7], [0, 0]),
            (0.0, [5, 0], 1.0, [0.0, 0.0], None),
            (0.0, [-7, 0], 1.0, [0.0, 0.0], None),
            (0.0, [0, 3], 1.0, [0.0, 0.0], None),
            (0.0, [0, -11], 1.0, [0.0, 0.0], None),
            (23.5, [2, -3], 1.1, [5.0, -7.0], None),
            (-61.0, [0, 0], 0.8, [0.0, 0.0], [3, 4]),
        ]:
            cases.append(dict(fn="affine", angle=angle, translate=translate, scale=scale, shear=sh, center=center,
                              interp=interp))
        for angle in (0.0, 17.5, -33.0, 90.0, -90.0, 180.0, 270.0, 135.0, -135.0, 45.5, 360.0, -0.0):
            cases.append(dict(fn="rotate", angle=angle, interp=interp))
    for fn in ("brightness", "saturation", "contrast", "sharpness"):
        for arg in (0.01, 0.5, 1.0, 1.37, 1.99):
            cases.append(dict(fn=fn, arg=arg))
    for arg in (-0.5, -0.21, 0.0, 0.13, 0.37, 0.5):
        cases.append(dict(fn="hue", arg=arg))
    for bits in range(9):
        cases.append(dict(fn="posterize", arg=bits))
    for threshold in (0.0, 1.0, 127.5, 128.0, 200.3, 255.0):
        cases.append(dict(fn="solarize", arg=threshold))
    for fn in ("autocontrast", "equalize", "invert"):
        cases.append(dict(fn=fn))
    for op, magnitudes in [
        ("Identity", [0.0]), ("ShearX", [0.5, -0.33]), ("ShearY", [0.99, -0.066]), ("TranslateX", [12.7, -3.2]),
        ("TranslateY", [31.0, -0.5]), ("Rotate", [37.5, -90.0, 135.0]), ("Brightness", [0.45, -0.6]),
        ("Color", [0.45, -0.99]), ("Contrast", [0.2, -0.7]), ("Sharpness", [0.9, -0.9]), ("Posterize", [3.0, 8.0]),
        ("Solarize", [0.4, 1.0, 0.0]), ("AutoContrast", [0.0]), ("Equalize", [0.0]), ("Invert", [0.0]),
    ]:
        for magnitude in magnitudes:
            for interp in ("nearest", "bilinear"):
                cases.append(dict(fn="aug_op", op=op, magnitude=magnitude, interp=interp))
    return cases


def policy(name):
    if name == "ta_wide":
        return v2.TrivialAugmentWide()
    if name == "ta_wide_bilinear":
        return v2.TrivialAugmentWide(interpolation=INTERP["bilinear"])
    if name == "rand_augment":
        return v2.RandAugment()
    if name == "rand_augment_m15_n3":
        return v2.RandAugment(num_ops=3, magnitude=15)
    if name == "imagenet":
        return v2.AutoAugment(AutoAugmentPolicy.IMAGENET)
    if name == "augmix":
        return v2.AugMix()
    if name == "augmix_s7":
        return v2.AugMix(severity=7)
    if name == "augmix_nearest":
        return v2.AugMix(interpolation=INTERP["nearest"])
    raise ValueError(name)


def main():
    mode, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    write_images(outdir)
    cases = []
    if mode == "ops":
        for src in IMAGES:
            for k, case in enumerate(op_cases()):
                case = dict(case, src=src, out="%s_%d.chw" % (src, k))
                write(outdir, case["out"], functional(case, IMAGES[src]))
                cases.append(case)
    elif mode == "policies":
        for name in ("ta_wide", "ta_wide_bilinear", "rand_augment", "rand_augment_m15_n3", "imagenet", "augmix",
                     "augmix_s7", "augmix_nearest"):
            for src in ("square", "odd"):
                for seed in range(40):
                    t = policy(name)
                    applied = []
                    apply = t._apply_image_or_video_transform

                    def recording(img, transform_id, magnitude, interpolation, fill, apply=apply, applied=applied):
                        applied.append([transform_id, magnitude])
                        return apply(img, transform_id, magnitude, interpolation=interpolation, fill=fill)

                    t._apply_image_or_video_transform = recording
                    torch.manual_seed(seed)
                    out = t(IMAGES[src])
                    after = int(torch.randint(2**31, ()))
                    case = dict(policy=name, src=src, seed=seed, applied=applied, after=after,
                                out="%s_%s_%d.chw" % (name, src, seed))
                    write(outdir, case["out"], out)
                    cases.append(case)
    elif mode == "erasing":
        for p in (0.25, 0.5, 1.0):
            for h, w in ((32, 32), (37, 23), (5, 7), (224, 224)):
                for seed in range(60):
                    t = v2.RandomErasing(p=p, value=0)
                    made = []
                    make = t.make_params

                    def recording(flat_inputs, make=make, made=made):
                        params = make(flat_inputs)
                        made.append(params)
                        return params

                    t.make_params = recording
                    torch.manual_seed(seed)
                    t(torch.ones(3, h, w))
                    after = int(torch.randint(2**31, ()))
                    box = None
                    if made and made[0]["v"] is not None:
                        box = [made[0][k] for k in ("i", "j", "h", "w")]
                    cases.append(dict(p=p, h=h, w=w, seed=seed, box=box, after=after))
        g = torch.Generator().manual_seed(5)
        normalised = torch.randn(3, 11, 13, generator=g)
        write(outdir, "normalised.f32", normalised)
        for k, (i, j, h, w) in enumerate(((0, 0, 11, 13), (2, 3, 4, 5), (10, 12, 1, 1), (0, 5, 11, 1))):
            out = F.erase(normalised, i, j, h, w, torch.tensor([0.0])[:, None, None])
            name = "erased_%d.f32" % k
            write(outdir, name, out)
            cases.append(dict(fixed=[i, j, h, w], out=name))
    elif mode == "jitter":
        # ColorJitter(brightness, contrast, saturation, hue); a 0 is None (its range is the center alone).
        for b, c, s, h in ((0.4, 0.4, 0.4, 0.1), (0.4, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.5), (1.7, 0.3, 0.9, 0.25),
                           (0.0, 0.8, 0.2, 0.0)):
            for src in IMAGES:
                for seed in range(12):
                    torch.manual_seed(seed)
                    out = v2.ColorJitter(brightness=b, contrast=c, saturation=s, hue=h)(IMAGES[src])
                    after = int(torch.randint(2**31, ()))
                    case = dict(jitter=[b, c, s, h], src=src, seed=seed, after=after,
                                out="jitter_%s_%d_%d.chw" % (src, len(cases), seed))
                    write(outdir, case["out"], out)
                    cases.append(case)
    else:
        raise SystemExit("unknown mode " + mode)
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
