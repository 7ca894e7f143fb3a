#!/usr/bin/env python3
"""Writes the fuzz seed corpus (tests/fuzz/corpus/{torch_save,safetensors,idx,config}) with the project venv's torch.

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


torch_save_seeds(corpus / "torch_save")
safetensors_seeds(corpus / "safetensors")
idx_seeds(corpus / "idx")
config_seeds(corpus / "config")
