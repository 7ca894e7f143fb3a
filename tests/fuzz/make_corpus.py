#!/usr/bin/env python3
"""Writes the fuzz seed corpus (tests/fuzz/corpus/{torch_save,safetensors,idx,config,tar_shard}) with the project venv's
torch.

Usage: .venv/bin/python tests/fuzz/make_corpus.py   (rerun only to regenerate the seeds; they are committed)
"""
import collections
import gzip
import pathlib
import shutil
import struct

import torch

root = pathlib.Path(__file__).resolve().parent
corpus = root / "corpus"
repo = root.parent.parent


def torch_save_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.save({"w": torch.tensor([1.0, 2.0, 3.0]), "b": torch.tensor([1])}, out / "plain_dict.pt")
    torch.save(torch.nn.Linear(2, 2).state_dict(), out / "ordered_dict_metadata.pt")
    base = torch.arange(12.0).view(3, 4)
    torch.save({"base": base, "t": base.t(), "slice": base[1:, ::2]}, out / "views_shared_storage.pt")
    torch.save({"h": torch.ones(2, dtype=torch.half), "bf": torch.ones(2, dtype=torch.bfloat16),
                "bool": torch.tensor([True, False]), "i8": torch.tensor([-1], dtype=torch.int8),
                "u8": torch.tensor([255], dtype=torch.uint8), "c": torch.ones(1, dtype=torch.complex64),
                "d": torch.ones(1, dtype=torch.float64), "empty": torch.zeros(0, 3)}, out / "dtypes.pt")
    torch.save({"p": torch.nn.Parameter(torch.ones(2))}, out / "parameter.pt")
    model = collections.OrderedDict(w=torch.ones(2, 2))
    torch.save({"model": model, "epoch": 3, "name": "run", "flag": True, "none": None, "lr": 0.5, "big": 2**40,
                "neg": -7, "optimizer": {"state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(2, 2)}},
                                         "param_groups": [{"lr": 0.1, "params": [0], "betas": (0.9, 0.999)}]}},
               out / "checkpoint_like.pt")


def idx_bytes(dims, data):
    return struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def idx_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    one = idx_bytes([5], range(5))
    three = idx_bytes([2, 3, 2], range(12))
    (out / "one_dim").write_bytes(one)
    (out / "three_dims").write_bytes(three)
    (out / "four_dims").write_bytes(idx_bytes([1, 2, 1, 2], [9, 8, 7, 6]))
    (out / "three_dims.gz").write_bytes(gzip.compress(three, mtime=0))
    (out / "two_members_padded.gz").write_bytes(gzip.compress(three[:7], mtime=0) + gzip.compress(three[7:], mtime=0)
                                                + b"\0\0\0\0")


def safetensors_seeds(out):
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.arange(6.0).view(2, 3), "n": torch.tensor(3), "h": torch.ones(2, dtype=torch.half),
               "bf": torch.ones(1, dtype=torch.bfloat16), "b": torch.tensor([True]), "e": torch.zeros(0, 2)},
              out / "dtypes.safetensors", metadata={"format": "pt"})
    save_file(torch.nn.Conv2d(1, 2, 3).state_dict(), out / "conv.safetensors")


def config_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    for toml in sorted((repo / "configs").glob("*.toml")):
        shutil.copyfile(toml, out / toml.name)


def tar_shard_seeds(out):
    """Shards as webdataset writes them (plain, gzip), one with a GNU long name, metadata and a folder, one with a pax
    header, and an index of the first (the ddpidx format, docs/data.md)."""
    import io
    import tarfile
    out.mkdir(parents=True, exist_ok=True)

    def shard(path, members, **kw):
        with tarfile.open(path, "w", **kw) as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                if data is None:
                    info.type = tarfile.DIRTYPE
                    t.addfile(info)
                else:
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))

    two = [("a/x.jpg", b"\xff\xd8\xff"), ("a/x.cls", b"1"), ("a/y.png", b"\x89PNG"), ("a/y.cls", b"2")]
    shard(out / "two_samples.tar", two, format=tarfile.USTAR_FORMAT)
    with open(out / "two_samples.tar", "rb") as f, gzip.open(out / "two_samples.tar.gz", "wb") as g:
        g.write(f.read())
    shard(out / "gnu_long_name.tar", [("__meta__", b"{}"), ("dir", None), ("d/" + "n" * 120 + ".jpg", b"j"),
                                       ("d/" + "n" * 120 + ".cls", b"0")], format=tarfile.GNU_FORMAT)
    shard(out / "pax.tar", [("p\u00e9/s.jpg", b"jj"), ("p\u00e9/s.cls", b"3")], format=tarfile.PAX_FORMAT)
    # The index of two_samples.tar: samples at 0 (x: 2 members) and 2048 (y), each 2048 bytes.
    keys = b"a/xa/y"
    index = b"DDPSHIX1" + struct.pack("<QQQQ", (out / "two_samples.tar").stat().st_size, 0, 2, len(keys))
    index += struct.pack("<qqqQ", 0, 2048, 1, 3) + struct.pack("<qqqQ", 2048, 2048, 2, 6) + keys
    (out / "two_samples.tar.ddpidx").write_bytes(index)


torch_save_seeds(corpus / "torch_save")
safetensors_seeds(corpus / "safetensors")
idx_seeds(corpus / "idx")
config_seeds(corpus / "config")
tar_shard_seeds(corpus / "tar_shard")
