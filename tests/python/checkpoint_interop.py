# Checkpoint interop oracle for tests: ddptrain checkpoints resumed by PyTorch, and checkpoints PyTorch writes.
#
# Training as optim_reference.py does it (classic Net, DistributedSampler(world 1) order, ddptrain's LR rule set per
# step from the global step), with torch.optim.SGD / AdamW / Adam / RMSprop and torch.amp.GradScaler("cpu") themselves.
#
#   continue --ckpt C --init I --steps M --out OUT   torch.load(C) (2.x default weights_only=True); model (strict),
#         optimizer and scaler load_state_dict; prints the checkpoint optimizer's structure vs the state_dict() of a
#         Python optimizer trained from I for C's global_step steps; trains M more steps -> OUT (model state dict)
#   write --init I --steps N --then M --ckpt C --out OUT   trains N steps, writes C = {"model", "optimizer",
#         "global_step"} (+ "scaler" with --scaler-init-scale), trains M more -> OUT
#   to-v1 --ckpt C --out V1   rewrites a format 2 checkpoint in format 1's flat optimizer layout
#   scaler --ckpt C   GradScaler("cpu").load_state_dict(C["scaler"]); prints whether its state_dict() equals C's, and
#         the scale after one more finite step
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import Net, find, optimizer_params, parse_arguments, read_idx  # noqa: E402
from optim_reference import warmup_factor  # noqa: E402


def make_optimizer(a, model):
    if a.optimizer == "sgd":
        return torch.optim.SGD(optimizer_params(model, a), lr=a.lr, momentum=a.momentum, dampening=0.0,
                               weight_decay=a.weight_decay, nesterov=bool(a.nesterov))
    if a.optimizer == "rmsprop":
        return torch.optim.RMSprop(optimizer_params(model, a), lr=a.lr, alpha=a.alpha, eps=a.eps, momentum=a.momentum,
                                   centered=bool(a.centered), weight_decay=a.weight_decay)
    adam = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[a.optimizer]
    return adam(optimizer_params(model, a), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay,
                amsgrad=bool(a.amsgrad))


def loader(a):
    images = read_idx(find(a.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(a.data, "train-labels-idx1-ubyte")).long()
    x = images.unsqueeze(1).to(torch.float32).div(255).sub(a.mean).div(a.std)
    ds = TensorDataset(x, labels)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=a.seed)
    return sampler, DataLoader(ds, batch_size=a.batch, sampler=sampler)


def train(a, model, opt, first_step, steps):
    """Optimizer steps first_step .. first_step+steps-1, skipping the batches earlier steps consumed."""
    sampler, data = loader(a)
    per_epoch = len(data)
    step, end = first_step, first_step + steps
    while step < end:
        epoch, skip = divmod(step, per_epoch)
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(data):
            if i < skip:
                continue
            for g in opt.param_groups:
                g["lr"] = a.lr * warmup_factor(step, a.warmup)
            opt.zero_grad()
            F.nll_loss(model(xb), yb).backward()
            opt.step()
            step += 1
            if step == end:
                break


def fresh(a):
    model = Net(0.0)
    model.load_state_dict(torch.load(a.init))
    return model, make_optimizer(a, model)


def layout(v):
    """Keys, container kinds, value types, tensor dtypes and shapes; values left out."""
    if isinstance(v, dict):
        return {repr(k): layout(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [layout(x) for x in v]
    if torch.is_tensor(v):
        return ["Tensor", str(v.dtype), list(v.shape)]
    return type(v).__name__


def max_value_diff(a, b):
    """Max |a - b| over the tensors of two equal layouts, each tensor's measured against max(1, its largest |b|): a
    centered RMSprop's momentum buffers grow to hundreds, where float32 rounding alone moves 1e-7 of the value.
    Non-tensor values must be equal (lr to 1e-12)."""
    if isinstance(a, dict):
        return max([max_value_diff(a[k], b[k]) for k in a] + [0.0])
    if isinstance(a, (list, tuple)):
        return max([max_value_diff(x, y) for x, y in zip(a, b)] + [0.0])
    if torch.is_tensor(a):
        if not a.numel():
            return 0.0
        return (a.double() - b.double()).abs().max().item() / max(1.0, b.double().abs().max().item())
    if isinstance(a, float) and isinstance(b, float):
        return 0.0 if abs(a - b) <= 1e-12 * max(1.0, abs(a)) else float("inf")
    return 0.0 if a == b else float("inf")


def cmd_continue(a):
    ckpt = torch.load(a.ckpt)  # torch 2.x default: weights_only=True
    torch.load(a.ckpt, weights_only=True)
    model = Net(0.0)
    model.load_state_dict(ckpt["model"])  # strict
    opt = make_optimizer(a, model)
    opt.load_state_dict(ckpt["optimizer"])
    scaler = torch.amp.GradScaler("cpu")
    if ckpt.get("scaler"):
        scaler.load_state_dict(ckpt["scaler"])
    step = ckpt["global_step"]
    ref_model, ref_opt = fresh(a)
    train(a, ref_model, ref_opt, 0, step)
    ref = ref_opt.state_dict()
    same = layout(ckpt["optimizer"]) == layout(ref)
    print("optimizer_layout_equal", same)
    if not same:
        print("ddptrain:", layout(ckpt["optimizer"]), "\npython:  ", layout(ref))
    diff = max_value_diff(ckpt["optimizer"], ref) if same else float("inf")
    print("optimizer_state_max_diff %.3g" % diff)
    print("optimizer_state_max_abs", max(v.abs().max().item() for s in ref["state"].values() for v in s.values()))
    print("state_keys", sorted(ckpt["optimizer"]["state"].keys()), "group_keys", sorted(ref["param_groups"][0]))
    train(a, model, opt, step, a.steps)
    torch.save(dict(model.state_dict()), a.out)


def cmd_write(a):
    model, opt = fresh(a)
    train(a, model, opt, 0, a.steps)
    ckpt = {"model": dict(model.state_dict()), "optimizer": opt.state_dict(), "global_step": a.steps}
    if a.scaler_init_scale > 0:
        scaler = torch.amp.GradScaler("cpu", init_scale=a.scaler_init_scale, growth_factor=a.scaler_growth_factor,
                                      growth_interval=a.scaler_growth_interval)
        ckpt["scaler"] = scaler.state_dict()
    torch.save(ckpt, a.ckpt)
    train(a, model, opt, a.steps, a.then)
    torch.save(dict(model.state_dict()), a.out)


def cmd_to_v1(a):
    ckpt = torch.load(a.ckpt)
    flat = {}
    for index, fields in ckpt["optimizer"]["state"].items():
        for name, value in fields.items():
            flat["%d.%s" % (index, name)] = int(value.item()) if name == "step" else value
    ckpt["optimizer"] = flat
    ckpt["format_version"] = 1
    torch.save(ckpt, a.out)


def cmd_scaler(a):
    ckpt = torch.load(a.ckpt)
    scaler = torch.amp.GradScaler("cpu")
    scaler.load_state_dict(ckpt["scaler"])
    state = scaler.state_dict()
    print("scaler_state_equal", layout(state) == layout(ckpt["scaler"]) and state == ckpt["scaler"])
    print("scaler_state", sorted(state.items()))
    print("scaler_scale %.10g" % scaler.get_scale())
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=0.1)
    scaler.scale(w.sum()).backward()
    scaler.step(opt)
    scaler.update()
    print("scaler_scale_after_one_step %.10g" % scaler.get_scale())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["continue", "write", "to-v1", "scaler"])
    a = parse_arguments([("ckpt", str, None), ("out", str, None), ("steps", int, 0), ("then", int, 0),
                         ("optimizer", str, "sgd"), ("weight_decay", float, 0.0), ("nesterov", int, 0), ("warmup", int, 0),
                         ("scaler_init_scale", float, 0.0), ("scaler_growth_factor", float, 2.0),
                         ("scaler_growth_interval", int, 2000), ("amsgrad", int, 0), ("alpha", float, 0.99),
                         ("centered", int, 0), ("eps", float, 1e-8)], parser=p)
    torch.set_num_threads(1)
    {"continue": cmd_continue, "write": cmd_write, "to-v1": cmd_to_v1, "scaler": cmd_scaler}[a.command](a)


if __name__ == "__main__":
    main()
