# Optimizer-state oracle: an optimizer of the class a file names (torch.optim's or timm.optim's) loads the file's
# state_dict() and gives it back unchanged.
#
#   optimizer_round_trip.py IN OUT [IN OUT ...]   IN = {"optimizer": state_dict, "torch_class": "torch.optim.X" or
#       "timm.optim.X", "shapes": [[...], ...]}: X over zero parameters of those shapes (built from param_groups[0]'s
#       hyperparameters, those X's constructor takes), load_state_dict(IN["optimizer"]), then state_dict() saved to
#       OUT; prints "IN layout_equal B" and "IN values_equal B" (keys, order, types, dtypes, shapes; values exactly).
#       Each pair in turn, in one process.
import importlib
import inspect
import sys

import torch


def layout(v):
    if isinstance(v, dict):
        return [(repr(k), layout(x)) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [layout(x) for x in v]
    if torch.is_tensor(v):
        return ["Tensor", str(v.dtype), list(v.shape)]
    return type(v).__name__


def equal(a, b):
    if isinstance(a, dict):
        return list(a) == list(b) and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if torch.is_tensor(a):
        return torch.equal(a, b)
    return a == b


def round_trip(src, dst):
    saved = torch.load(src)
    module, name = saved["torch_class"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    params = [torch.zeros(shape, requires_grad=True) for shape in saved["shapes"]]
    group = saved["optimizer"]["param_groups"][0]
    takes = inspect.signature(cls.__init__).parameters
    opt = cls(params, **{k: v for k, v in group.items() if k != "params" and k in takes})
    opt.load_state_dict(saved["optimizer"])
    out = opt.state_dict()
    print(src, "layout_equal", layout(out) == layout(saved["optimizer"]))
    print(src, "values_equal", equal(out, saved["optimizer"]))
    torch.save(out, dst)


def main():
    for src, dst in zip(sys.argv[1::2], sys.argv[2::2]):
        round_trip(src, dst)


if __name__ == "__main__":
    main()
