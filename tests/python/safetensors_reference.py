"""The Python side of tests/checkpoint/safetensors_test.cpp: safetensors' own save_file / load_file as the oracle.

  dtypes DIR
      One tensor of each dtype ddptrain reads (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL, a 0-d scalar, an empty and a
      4-d tensor), saved with safetensors.torch.save_file to DIR/py.safetensors and with torch.save to DIR/py.pt.
  same ST PT [ST PT ...]
      Each safetensors file (safetensors.torch.load_file) holds exactly the state dict of its torch.save file: the
      same names, dtypes, shapes and bits; prints "same N" per pair. ST's metadata must say format "pt".
  torchvision NAME NUM_CLASSES SEED ST
      torchvision.models.NAME(num_classes=NUM_CLASSES) initialised under torch.manual_seed(SEED), its state dict
      saved with save_file.
  load-strict NAME NUM_CLASSES ST
      The file loads strictly into torchvision.models.NAME(num_classes=NUM_CLASSES); prints "loaded N".
"""
import sys

import torch
import torchvision
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def dtypes(out):
    g = torch.Generator().manual_seed(3)
    sd = {
        "f64": torch.randn(3, 4, generator=g, dtype=torch.float64),
        "f32": torch.randn(2, 3, 4, 5, generator=g),
        "f16": torch.randn(7, generator=g).half(),
        "bf16": torch.randn(2, 9, generator=g).bfloat16(),
        "i64": torch.randint(-2**62, 2**62, (5,), generator=g, dtype=torch.int64),
        "i32": torch.randint(-2**31, 2**31 - 1, (3, 2), generator=g, dtype=torch.int32),
        "i16": torch.randint(-2**15, 2**15 - 1, (4,), generator=g, dtype=torch.int16),
        "i8": torch.randint(-128, 127, (6,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (2, 2), generator=g, dtype=torch.uint8),
        "bool": torch.rand(5, generator=g) > 0.5,
        "scalar": torch.tensor(2.5),
        "empty": torch.empty(0, 3),
        "num_batches_tracked": torch.tensor(17, dtype=torch.int64),
    }
    save_file(sd, out + "/py.safetensors", metadata={"format": "pt"})
    torch.save(sd, out + "/py.pt")


def same(pairs):
    for st, pt in zip(pairs[::2], pairs[1::2]):
        with safe_open(st, framework="pt") as f:
            assert (f.metadata() or {}).get("format") == "pt", f.metadata()
        a, b = load_file(st), torch.load(pt)
        assert list(sorted(a)) == list(sorted(b)), (sorted(a), sorted(b))
        for k in b:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (k, a[k].dtype, b[k].dtype, a[k].shape)
            assert torch.equal(a[k].reshape(-1).view(torch.uint8) if a[k].numel() else a[k],
                               b[k].reshape(-1).view(torch.uint8) if b[k].numel() else b[k]), k
        print("same", len(b))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "dtypes":
        dtypes(args[0])
    elif cmd == "same":
        same(args)
    elif cmd == "torchvision":
        torch.manual_seed(int(args[2]))
        save_file(getattr(torchvision.models, args[0])(num_classes=int(args[1])).state_dict(), args[3])
    elif cmd == "load-strict":
        model = getattr(torchvision.models, args[0])(num_classes=int(args[1]))
        model.load_state_dict(load_file(args[2]), strict=True)
        print("loaded", len(model.state_dict()))
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
