# State-dict oracle for tests/checkpoint: PyTorch writes torch.save fixtures, loads ddptrain's files, evaluates, trains.
"""Run with the project venv's Python (.venv/bin/python: torch 2.11 + torchvision 0.26). Subcommands:

  save KIND PT DUMP [--plain] [--seed S] [--protocol P]
      KIND = resnet18 | net | tensors. Writes torch.save(state_dict) (an OrderedDict; --plain: a dict) to PT
      and the values to DUMP.txt / DUMP.bin (see dump()).
  save-other WHAT PT
      WHAT = module (torch.save(Net())) | list (of tensors) | checkpoint ({"model": state_dict, "epoch": 3}).
  save-layout WHAT SRC_PT PT
      The Net state dict in SRC_PT re-saved to PT as: ddp (the state_dict of a real DistributedDataParallel(Net())
      on a gloo world of one: keys "module.*") | model-dict ({"model": sd, "optimizer": {...}, "epoch": 3}) |
      state-dict-dict ({"state_dict": sd, "epoch": 3}) | prefixed ({"model." + k: v}) | nested ({"net": sd, "epoch": 3})
      | compiled (torch.compile(Net()).state_dict(): keys "_orig_mod.*") | safetensors (safetensors.torch.save_file).
  load-into MODEL PT DUMP
      torch.load(PT) into MODEL (resnet18 | net) with strict=True, then dumps model.state_dict() to DUMP.
  eval MODEL PT DATA_DIR [--mean M --std S --batch B]
      Eval mode, MODEL loaded (strict) from PT, on DATA_DIR/t10k-*; prints
      "correct=C total=N loss=MEAN_LOSS correct_top5=C5" (C5: the label among torch.topk's 5 largest outputs).
  sgd INIT_PT DATA_DIR DUMP --steps K --batch B --lr LR --seed S
      Net from INIT_PT, K steps of plain SGD (nll_loss, dropout 0) over randperm(N, seed S) batches; dumps result.

Commands separated by an argument `then` run one after the other in one process (torch is imported once).
"""
import argparse
import os
import sys
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import Net, read_idx  # noqa: E402

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def resnet18_1ch():
    import torchvision  # here: importing it costs a Net-only call a second or two

    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def make_model(name):
    return {"net": Net, "resnet18": resnet18_1ch}[name]()


def dump(state, prefix):
    """PREFIX.txt: one line per entry "key<TAB>dtype<TAB>d0,d1,...<TAB>nbytes"; PREFIX.bin: the contiguous bytes."""
    with open(prefix + ".txt", "w") as txt, open(prefix + ".bin", "wb") as raw:
        for key, value in state.items():
            t = value.detach().cpu().contiguous()
            data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            shape = ",".join(str(d) for d in t.shape)
            txt.write(f"{key}\t{str(t.dtype).replace('torch.', '')}\t{shape}\t{len(data)}\n")
            raw.write(data)


def tensors_fixture():
    """Views with offsets and strides, shared storages and every plain dtype."""
    base = torch.randn(6, 7)
    wide = torch.randn(4, 5, dtype=torch.float64)
    state = OrderedDict()
    state["base"] = base
    state["slice"] = base[1:4, 2:6]                 # offset 9, strides (7, 1), shares base's storage
    state["transposed"] = base.t()                  # strides (1, 7)
    state["every_other"] = base[:, ::2]             # stride 2
    state["row"] = base[5]                          # offset 35
    state["double_view"] = wide[2:, 1:]             # alone in its storage, offset and strides
    state["half"] = torch.randn(3, 2).half()
    state["bfloat16"] = torch.randn(5).bfloat16()
    state["int64_scalar"] = torch.tensor(12345678901, dtype=torch.int64)
    state["int32"] = torch.randint(-1000, 1000, (2, 3), dtype=torch.int32)
    state["int16"] = torch.randint(-1000, 1000, (4,), dtype=torch.int16)
    state["int8"] = torch.randint(-100, 100, (4,), dtype=torch.int8)
    state["uint8"] = torch.randint(0, 255, (3, 3), dtype=torch.uint8)
    state["bool"] = torch.rand(7) > 0.5
    state["complex64"] = torch.randn(3, dtype=torch.complex64)
    state["empty"] = torch.zeros(0, 4)
    return state


def save(args):
    torch.manual_seed(args.seed)
    if args.kind == "tensors":
        state = tensors_fixture()
    else:
        model = make_model(args.kind)
        if args.kind == "resnet18":  # one train-mode forward: BN running stats and num_batches_tracked move
            model.train()
            with torch.no_grad():
                model(torch.randn(2, 1, 28, 28))
        state = model.state_dict()
    obj = dict(state) if args.plain else state
    torch.save(obj, args.pt, pickle_protocol=args.protocol)
    dump(state, args.dump)


def save_other(args):
    torch.manual_seed(0)
    model = Net()
    obj = {"module": lambda: model,
           "list": lambda: [p.detach() for p in model.parameters()],
           "checkpoint": lambda: {"model": model.state_dict(), "epoch": 3}}[args.what]()
    torch.save(obj, args.pt)


def ddp_state_dict(state, rendezvous_file):
    """The state_dict() of DistributedDataParallel(Net()) holding `state`, on a gloo world of one."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", init_method="file://" + rendezvous_file, rank=0, world_size=1)
    try:
        model = Net()
        model.load_state_dict(state, strict=True)
        wrapped = DistributedDataParallel(model)
        out = wrapped.state_dict()
    finally:
        dist.destroy_process_group()
    assert all(k.startswith("module.") for k in out), list(out)[:3]
    return out


def save_layout(args):
    state = torch.load(args.src_pt)
    layouts = {
        "ddp": lambda: ddp_state_dict(state, os.path.abspath(args.pt) + ".rendezvous"),
        "model-dict": lambda: {"model": state, "optimizer": {"state": {}, "param_groups": []}, "epoch": 3},
        "state-dict-dict": lambda: {"state_dict": state, "epoch": 3},
        "prefixed": lambda: OrderedDict(("model." + k, v) for k, v in state.items()),
        "nested": lambda: {"net": state, "epoch": 3},
    }
    if args.what == "compiled":  # a real OptimizedModule's state dict ("_orig_mod.*"), holding the file's weights
        compiled = torch.compile(make_model("net"))
        compiled._orig_mod.load_state_dict(state)
        out = compiled.state_dict()
        assert all(k.startswith("_orig_mod.") for k in out), list(out)[:3]
        torch.save(out, args.pt)
    elif args.what == "safetensors":  # whatever the file's name says, its bytes are safetensors'
        import safetensors.torch

        safetensors.torch.save_file(state, args.pt)
    else:
        torch.save(layouts[args.what](), args.pt)


def load_model(name, pt):
    model = make_model(name)
    model.load_state_dict(torch.load(pt), strict=True)
    return model


def normalize(images, mean, std):
    return images.to(torch.float32).div_(255).sub_(mean).div_(std).unsqueeze(1)


def load_split(data_dir, prefix):
    images = read_idx(f"{data_dir}/{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(f"{data_dir}/{prefix}-labels-idx1-ubyte.gz").to(torch.int64)
    return images, labels


def evaluate(args):
    model = load_model(args.model, args.pt)
    model.eval()
    images, labels = load_split(args.data_dir, "t10k")
    correct, correct_top5, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for start in range(0, len(labels), args.batch):
            x = normalize(images[start:start + args.batch], args.mean, args.std)
            y = labels[start:start + args.batch]
            out = model(x)
            loss = F.nll_loss if args.model == "net" else F.cross_entropy  # Net outputs log-probabilities
            loss_sum += float(loss(out, y, reduction="sum"))
            correct += int(out.argmax(1).eq(y).sum())
            correct_top5 += int(torch.topk(out, 5, dim=1).indices.eq(y.unsqueeze(1)).any(dim=1).sum())
    print(f"correct={correct} total={len(labels)} loss={loss_sum / len(labels)!r} correct_top5={correct_top5}")


def sgd(args):
    model = Net(dropout=0.0)
    model.load_state_dict(torch.load(args.init_pt), strict=True)
    model.train()
    images, labels = load_split(args.data_dir, "train")
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    g = torch.Generator()
    g.manual_seed(args.seed)  # DistributedSampler, epoch 0
    order = torch.randperm(len(labels), generator=g).tolist()
    for step in range(args.steps):
        idx = torch.tensor(order[step * args.batch:(step + 1) * args.batch])
        optimizer.zero_grad()
        loss = F.nll_loss(model(normalize(images[idx], MNIST_MEAN, MNIST_STD)), labels[idx])
        loss.backward()
        optimizer.step()
    dump(model.state_dict(), args.dump)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("save")
    p.add_argument("kind", choices=["resnet18", "net", "tensors"])
    p.add_argument("pt")
    p.add_argument("dump")
    p.add_argument("--plain", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--protocol", type=int, default=2)
    p.set_defaults(fn=save)
    p = sub.add_parser("save-other")
    p.add_argument("what", choices=["module", "list", "checkpoint"])
    p.add_argument("pt")
    p.set_defaults(fn=save_other)
    p = sub.add_parser("save-layout")
    p.add_argument("what", choices=["ddp", "model-dict", "state-dict-dict", "prefixed", "nested", "compiled",
                                    "safetensors"])
    p.add_argument("src_pt")
    p.add_argument("pt")
    p.set_defaults(fn=save_layout)
    p = sub.add_parser("load-into")
    p.add_argument("model", choices=["resnet18", "net"])
    p.add_argument("pt")
    p.add_argument("dump")
    p.set_defaults(fn=lambda a: dump(load_model(a.model, a.pt).state_dict(), a.dump))
    p = sub.add_parser("eval")
    p.add_argument("model", choices=["resnet18", "net"])
    p.add_argument("pt")
    p.add_argument("data_dir")
    p.add_argument("--mean", type=float, default=MNIST_MEAN)
    p.add_argument("--std", type=float, default=MNIST_STD)
    p.add_argument("--batch", type=int, default=1000)
    p.set_defaults(fn=evaluate)
    p = sub.add_parser("sgd")
    p.add_argument("init_pt")
    p.add_argument("data_dir")
    p.add_argument("dump")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.set_defaults(fn=sgd)
    commands = [[]]
    for a in sys.argv[1:]:
        if a == "then":
            commands.append([])
        else:
            commands[-1].append(a)
    for command in commands:
        args = parser.parse_args(command)
        args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
