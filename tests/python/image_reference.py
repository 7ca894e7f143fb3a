# Reference images for the image decoder: JPEG and PNG files with the RGB bytes Pillow decodes them to.
"""Usage: image_reference.py OUTDIR

Writes test images into OUTDIR (JPEG through Pillow; PNG through Pillow or, for what Pillow cannot write - 2/4-bit
and 16-bit gray, 16-bit LA/RGB/RGBA, Adam7 interlacing, every filter type - a small PNG writer below) and, for each,
the bytes of Image.open(path).convert("RGB") (torchvision's default_loader) as NAME.rgb. Some JPEGs are also decoded
after im.draft(mode, (w // s, h // s)), libjpeg's 1/s DCT-scaled decode (s = 2, 4, 8), as NAME.scaleS.rgb.

OUTDIR/manifest.txt: one line per check, "IMAGE RGBFILE WIDTH HEIGHT MIN_SIDE" (MIN_SIDE 0: full size; otherwise the
shorter side the decoder is asked for, which picks the same libjpeg scale as the draft).
"""
import os
import random
import struct
import sys
import warnings
import zlib

from PIL import Image

W, H = 37, 23  # odd sizes: partial MCUs, partial bytes of packed rows, every Adam7 pass non-empty


def pattern(w, h, channels, maximum, seed):
    """Rows of samples: smooth gradients with noise (exercises JPEG's DCT and every PNG filter)."""
    rnd = random.Random(seed)
    rows = []
    for y in range(h):
        row = []
        for x in range(w):
            for c in range(channels):
                base = ((x * (c + 1) * 7 + y * (3 - c % 3) * 11) * maximum) // (7 * w + 11 * h + 1)
                row.append(min(maximum, max(0, base + rnd.randrange(-maximum // 16, maximum // 16 + 1))))
        rows.append(row)
    return rows


def pil_image(mode, w, h, seed):
    channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}[mode]
    flat = bytes(v for row in pattern(w, h, channels, 255, seed) for v in row)
    return Image.frombytes(mode, (w, h), flat)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def filter_rows(rows, bpp):
    """Filters packed rows, cycling through PNG's five filter types."""
    out = bytearray()
    prior = bytes(len(rows[0])) if rows else b""
    for i, row in enumerate(rows):
        kind = i % 5
        out.append(kind)
        for j, v in enumerate(row):
            a = row[j - bpp] if j >= bpp else 0
            b = prior[j]
            c = prior[j - bpp] if j >= bpp else 0
            predictor = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
            out.append((v - predictor) & 0xFF)
        prior = row
    return bytes(out)


def pack_row(samples, depth):
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    per_byte = 8 // depth
    out = bytearray()
    for i in range(0, len(samples), per_byte):
        byte = 0
        for k in range(per_byte):
            s = samples[i + k] if i + k < len(samples) else 0
            byte |= s << (8 - depth * (k + 1))
        out.append(byte)
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(path, w, h, color_type, depth, rows, interlace=False, palette=None, trns=None):
    """A PNG from rows of samples (channels interleaved), filters cycling 0..4, optionally Adam7 interlaced."""
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]
    bpp = max(1, channels * depth // 8)
    if interlace:
        data = b""
        for x0, y0, dx, dy in ADAM7:
            sub = [[row[x * channels + c] for x in range(x0, w, dx) for c in range(channels)] for row in rows[y0::dy]]
            if sub and sub[0]:
                data += filter_rows([pack_row(r, depth) for r in sub], bpp)
    else:
        data = filter_rows([pack_row(r, depth) for r in rows], bpp)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    out += png_chunk(b"gAMA", struct.pack(">I", 100000))  # gamma 1.0: Pillow (and the decoder) apply none
    if palette is not None:
        out += png_chunk(b"PLTE", palette)
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    compressed = zlib.compress(data, 9)
    half = len(compressed) // 2  # two IDAT chunks: data split across chunks
    out += png_chunk(b"IDAT", compressed[:half]) + png_chunk(b"IDAT", compressed[half:]) + png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(out)


def palette_bytes(n, seed):
    rnd = random.Random(seed)
    return bytes(rnd.randrange(256) for _ in range(3 * n))


def write_images(out):
    """Writes every test image into out; returns their names."""
    names = []

    def jpeg(name, im, **options):
        im.save(os.path.join(out, name), "JPEG", **options)
        names.append(name)

    def pil_png(name, im, **options):
        im.save(os.path.join(out, name), "PNG", **options)
        names.append(name)

    def raw_png(name, w, h, color_type, depth, rows, **options):
        write_png(os.path.join(out, name), w, h, color_type, depth, rows, **options)
        names.append(name)

    rgb = pil_image("RGB", 96, 64, 1)
    jpeg("rgb_q90_420.jpg", rgb, quality=90, subsampling=2)
    jpeg("rgb_q95_444.jpg", rgb, quality=95, subsampling=0)
    jpeg("rgb_q75_422_optimized.jpg", rgb, quality=75, subsampling=1, optimize=True)
    jpeg("rgb_progressive.jpg", rgb, quality=90, progressive=True)
    jpeg("rgb_restart.jpg", rgb, quality=85, restart_marker_blocks=3)
    jpeg("rgb_37x23.jpg", pil_image("RGB", W, H, 2), quality=90, subsampling=2)
    jpeg("gray.jpg", pil_image("L", 50, 41, 3), quality=90)
    jpeg("cmyk.jpg", pil_image("CMYK", 45, 30, 4), quality=90)  # Pillow writes Adobe (inverted) CMYK
    jpeg("large_640x480.jpg", pil_image("RGB", 640, 480, 5), quality=90)
    # Junk bytes between two markers: libjpeg warns (JWRN_EXTRANEOUS_DATA) and decodes, as does Pillow.
    with open(os.path.join(out, "rgb_q90_420.jpg"), "rb") as f:
        data = f.read()
    app0_end = 4 + struct.unpack(">H", data[4:6])[0]
    with open(os.path.join(out, "extraneous_bytes.jpg"), "wb") as f:
        f.write(data[:app0_end] + b"\x00\x12\x34" + data[app0_end:])
    names.append("extraneous_bytes.jpg")

    pil_png("mode1.png", pil_image("L", W, H, 6).point(lambda v: 255 if v > 100 else 0).convert("1"))
    pil_png("gray8.png", pil_image("L", W, H, 7))
    pil_png("gray8_trns.png", pil_image("L", W, H, 8), transparency=37)
    pil_png("la8.png", pil_image("LA", W, H, 9))
    pil_png("rgb8.png", pil_image("RGB", W, H, 10))
    pil_png("rgb8_trns.png", pil_image("RGB", W, H, 11), transparency=(1, 2, 3))
    pil_png("rgba8.png", pil_image("RGBA", W, H, 12))
    for bits, colors in [(1, 2), (2, 4), (4, 16), (8, 256)]:
        p = Image.frombytes("P", (W, H), bytes(v % colors for row in pattern(W, H, 1, 255, 20 + bits) for v in row))
        p.putpalette(palette_bytes(colors, 30 + bits))
        pil_png("palette%d.png" % bits, p)
    p = Image.frombytes("P", (W, H), bytes(v for row in pattern(W, H, 1, 255, 40) for v in row))
    p.putpalette(palette_bytes(256, 41))
    pil_png("palette8_trns_bytes.png", p, transparency=bytes(range(0, 256, 2)))
    p4 = Image.frombytes("P", (W, H), bytes(v % 16 for row in pattern(W, H, 1, 255, 42) for v in row))
    p4.putpalette(palette_bytes(16, 43))
    pil_png("palette4_trns_index.png", p4, transparency=5)

    raw_png("gray1_interlaced.png", W, H, 0, 1, pattern(W, H, 1, 1, 50), interlace=True)
    raw_png("gray2.png", W, H, 0, 2, pattern(W, H, 1, 3, 51))
    raw_png("gray4.png", W, H, 0, 4, pattern(W, H, 1, 15, 52))
    raw_png("gray4_interlaced.png", W, H, 0, 4, pattern(W, H, 1, 15, 53), interlace=True)
    raw_png("gray16.png", W, H, 0, 16, pattern(W, H, 1, 600, 54))  # values above 255: Pillow clips (I;16 -> RGB)
    raw_png("gray16_trns.png", W, H, 0, 16, pattern(W, H, 1, 400, 55), trns=struct.pack(">H", 300))
    raw_png("gray16_interlaced.png", W, H, 0, 16, pattern(W, H, 1, 65535, 56), interlace=True)
    raw_png("la16.png", W, H, 4, 16, pattern(W, H, 2, 65535, 57))
    raw_png("rgb16.png", W, H, 2, 16, pattern(W, H, 3, 65535, 58))
    raw_png("rgb16_trns.png", W, H, 2, 16, pattern(W, H, 3, 65535, 59), trns=struct.pack(">HHH", 1, 2, 3))
    raw_png("rgba16.png", W, H, 6, 16, pattern(W, H, 4, 65535, 60))
    raw_png("rgba16_interlaced.png", W, H, 6, 16, pattern(W, H, 4, 65535, 61), interlace=True)
    raw_png("rgb8_interlaced.png", W, H, 2, 8, pattern(W, H, 3, 255, 62), interlace=True)
    raw_png("la8_interlaced.png", W, H, 4, 8, pattern(W, H, 2, 255, 63), interlace=True)
    raw_png("palette2_interlaced_trns.png", W, H, 3, 2, pattern(W, H, 1, 3, 64), interlace=True,
            palette=palette_bytes(4, 65), trns=b"\x00\x80")
    # Indices past the palette's end: Pillow gives black (its palette is zero past the PLTE entries).
    raw_png("palette8_short_plte.png", W, H, 3, 8, pattern(W, H, 1, 255, 66), palette=palette_bytes(10, 67))
    raw_png("tiny_1x1.png", 1, 1, 2, 8, [[200, 100, 50]])
    return names


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    lines = []
    for name in write_images(out):
        with Image.open(os.path.join(out, name)) as im, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Palette images with Transparency expressed in bytes ..."
            rgb = im.convert("RGB")
        with open(os.path.join(out, name + ".rgb"), "wb") as f:
            f.write(rgb.tobytes())
        lines.append("%s %s.rgb %d %d 0" % (name, name, rgb.width, rgb.height))
    # libjpeg's DCT-scaled decodes, as Pillow's draft() asks for them (scale 1/s: each side ceil(side / s)). MIN_SIDE
    # is the scaled shorter side, so the decoder's rule (the smallest scale keeping the shorter side >= MIN_SIDE)
    # picks the same scale: at 1/(2s) the shorter side is smaller.
    for name, s in [("large_640x480.jpg", 2), ("large_640x480.jpg", 4), ("large_640x480.jpg", 8), ("rgb_37x23.jpg", 2),
                    ("rgb_progressive.jpg", 4), ("gray.jpg", 8), ("cmyk.jpg", 2)]:
        with Image.open(os.path.join(out, name)) as im:
            w, h = im.size
            im.draft(im.mode, (w // s, h // s))
            scaled = im.convert("RGB")
        assert scaled.size == ((w + s - 1) // s, (h + s - 1) // s), (name, s, scaled.size)
        rgb_name = "%s.scale%d.rgb" % (name, s)
        with open(os.path.join(out, rgb_name), "wb") as f:
            f.write(scaled.tobytes())
        lines.append("%s %s %d %d %d" % (name, rgb_name, scaled.width, scaled.height, (min(w, h) + s - 1) // s))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
