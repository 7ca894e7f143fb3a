# The PyTorch side of every comparison (tests/python oracles, bench/ workers): ddptrain's models written in PyTorch,
# MNIST-format files read as torchvision reads them, and the argument tables the scripts share.
#
# bench/ and tests/python/ import this module (from this folder) and nothing of each other.
import argparse
import functools
import gzip
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """models/net.cpp's network: the classic MNIST CNN of PyTorch's examples (parameter names and shapes alike)."""

    def __init__(self, dropout=0.5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(dropout)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.dropout = dropout

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.reshape(-1, 320)  # a view when contiguous; a copy in NCHW order when channels_last
        x = F.relu(self.fc1(x))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


# The torchvision models a model.name builds: where the first convolution lives (ddptrain's model.in_channels
# replaces it), and which of ddptrain's model.dropout / model.stochastic_depth / image size the torchvision builder
# takes, as its keyword.
TORCHVISION_MODELS = {
    "resnet18": ("conv1", {}),
    "resnet34": ("conv1", {}),
    "resnet50": ("conv1", {}),
    "resnet101": ("conv1", {}),
    "resnet152": ("conv1", {}),
    "mobilenet_v3_large": ("features.0.0", {"dropout": "dropout"}),
    "efficientnet_v2_s": ("features.0.0", {"dropout": "dropout", "stochastic_depth": "stochastic_depth_prob"}),
    "regnet_y_1_6gf": ("stem.0", {}),
    "convnext_tiny": ("features.0.0", {"stochastic_depth": "stochastic_depth_prob"}),
    "vit_b_16": ("conv_proj", {"dropout": "dropout", "image_size": "image_size"}),
}


def build_model(name, dropout=None, in_channels=1, num_classes=10, stochastic_depth=None, image_size=224):
    """model.name's network: net, or the torchvision model of TORCHVISION_MODELS with an in_channels first
    convolution (ddptrain's names and shapes). dropout / stochastic_depth: None = the model's default (Net's 0.5,
    torchvision's builder's); a torchvision model that has none ignores them, as every model but vit_b_16 ignores
    image_size (its position embedding's image side)."""
    if name == "net":
        return Net(0.5 if dropout is None else dropout)
    import torchvision

    _, keywords = TORCHVISION_MODELS[name]
    given = {"dropout": dropout, "stochastic_depth": stochastic_depth, "image_size": image_size}
    kwargs = {keyword: given[ours] for ours, keyword in keywords.items() if given[ours] is not None}
    model = getattr(torchvision.models, name)(num_classes=num_classes, **kwargs)
    if in_channels != 3:
        replace_first_conv(model, name, in_channels)
    return model


# torchvision's own init of a first convolution where nn.Conv2d's default is not it: ConvNeXt.__init__'s
# trunc_normal_(std=0.02), VisionTransformer.__init__'s trunc_normal_(std=sqrt(1 / fan_in)), each with a zero bias.
FIRST_CONV_INIT = {
    "convnext_tiny": lambda conv: 0.02,
    "vit_b_16": lambda conv: math.sqrt(1 / (conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1])),
}


def replace_first_conv(model, name, in_channels):
    """ddptrain's model.in_channels: the first convolution of torchvision's model rebuilt for in_channels, in its place
    (TORCHVISION_MODELS) and with torchvision's init for it (FIRST_CONV_INIT; the others keep nn.Conv2d's own)."""
    place = TORCHVISION_MODELS[name][0]
    old = model.get_submodule(place)
    conv = nn.Conv2d(in_channels, old.out_channels, old.kernel_size, old.stride, old.padding,
                     bias=old.bias is not None)
    if name in FIRST_CONV_INIT:
        nn.init.trunc_normal_(conv.weight, std=FIRST_CONV_INIT[name](conv))
        nn.init.zeros_(conv.bias)
    model.set_submodule(place, conv)


NORM_CLASSES = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm,
                nn.LocalResponseNorm)


def weight_decay_groups(model, weight_decay, norm_weight_decay=None, bias_weight_decay=None):
    """The param groups torchvision's reference train.py makes with set_weight_decay(model, weight_decay,
    norm_weight_decay, custom_keys_weight_decay=[("bias", bias_weight_decay)] when that is given) (references/
    classification/utils.py): modules depth first, each one's own parameters (requires_grad only) before its
    children's; a parameter named "bias" to "bias" when bias_weight_decay is given, else a norm layer's to "norm" when
    norm_weight_decay is given, else to "other"; groups other, norm, bias, empty ones dropped. Each group also carries
    "names": its parameters' names in model.named_parameters() (pop it before handing the groups to torch.optim)."""
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {"other": ([], weight_decay), "norm": ([], norm_weight_decay), "bias": ([], bias_weight_decay)}

    def visit(module):
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if bias_weight_decay is not None and name == "bias":
                key = "bias"
            elif norm_weight_decay is not None and isinstance(module, NORM_CLASSES):
                key = "norm"
            else:
                key = "other"
            groups[key][0].append(p)
        for child in module.children():
            visit(child)

    visit(model)
    return [{"params": params, "weight_decay": decay, "names": [names[id(p)] for p in params]}
            for params, decay in groups.values() if params]


def optimizer_params(model, args):
    """What the oracles hand torch.optim: model.parameters(), or with args.norm_weight_decay or args.bias_weight_decay
    >= 0 (ddptrain's optimizer.* keys, -1 = unset) weight_decay_groups' groups with args.weight_decay."""
    norm, bias = getattr(args, "norm_weight_decay", -1.0), getattr(args, "bias_weight_decay", -1.0)
    if norm < 0 and bias < 0:
        return model.parameters()
    groups = weight_decay_groups(model, getattr(args, "weight_decay", 0.0), norm if norm >= 0 else None,
                                 bias if bias >= 0 else None)
    return [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups]


def read_idx(path):
    """An IDX file (raw or .gz) as a uint8 tensor, read into one buffer (no transient copies)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        header = f.read(4)
        dims = struct.unpack(">" + "I" * header[3], f.read(4 * header[3]))
        buffer = bytearray(math.prod(dims))
        if f.readinto(buffer) != len(buffer):
            raise ValueError(f"{path}: truncated")
    return torch.frombuffer(buffer, dtype=torch.uint8).reshape(dims)


def find(dir_, base):
    """dir_/base or dir_/base.gz, as torchvision's MNIST finds its files."""
    for name in (base, base + ".gz"):
        if os.path.exists(os.path.join(dir_, name)):
            return os.path.join(dir_, name)
    raise FileNotFoundError(os.path.join(dir_, base))


CIFAR10_TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
CIFAR10_TEST_FILES = ["test_batch.bin"]


def read_cifar10(dir_, files):
    """CIFAR-10's binary batches: uint8 images [N, 3, 32, 32] and int64 labels, the files in the order given."""
    records = torch.cat([torch.frombuffer(bytearray(open(os.path.join(dir_, f), "rb").read()), dtype=torch.uint8)
                         .reshape(-1, 3073) for f in files])
    return records[:, 1:].reshape(-1, 3, 32, 32).clone(), records[:, 0].long()


def ddp_train_and_save(model, inputs, labels, args, loss_fn):
    """PyTorch's DDP recipe as ddptrain runs it, in a joined process group: DistributedSampler(shuffle=True,
    seed=args.seed) with set_epoch per epoch, batches of args.batch, reference_optimizer (SGD(lr, momentum,
    weight_decay) unless args.optimizer names timm's Lars or Lamb) over the param groups of optimizer_params, for
    args.steps optimizer steps across epochs; rank 0 then saves the model's state dict (a plain dict) to args.out.
    With args.ema_decay > 0, an
    AveragedModel(get_ema_multi_avg_fn(decay), use_buffers=True) is updated after each step and its module's state
    dict saved to args.ema_out, updated at the epoch's iterations i with i % args.ema_steps == 0 and restarted
    (n_averaged = 0) after the updates of steps 1 to args.ema_restart_through, its decay adjusted as torchvision's
    references/classification/train.py adjusts it when args.ema_adjust_epochs is set (its --epochs). With
    args.warmup_steps, the learning rate of step k < warmup_steps is lr x (f + (1 - f) k / warmup_steps), f =
    args.warmup_start_factor (LinearLR's closed form). With args.ra_reps > 1 the sampler is torchvision's RASampler
    (references/classification/sampler.py) with that many repetitions; with args.label_smoothing > 0 the loss is
    F.cross_entropy(label_smoothing=...). With args.amp = "bf16" or "fp16", the forward runs under torch.autocast("cpu",
    bfloat16 or float16) and the loss in float32, as ddptrain's amp.dtype; float16 with torch.amp.GradScaler("cpu")
    (scale, step through the scaler, update), as ddptrain's amp.loss_scaling = "auto" does for float16. DDP searches
    for parameters the forward did not use when args has find_unused set (dist.find_unused_parameters), and takes the
    graph as static when args has static_graph set (dist.static_graph). With args.compress = "fp16" or "bf16", DDP
    runs PyTorch's fp16_compress_hook or bf16_compress_hook (dist.grad_compression); with "powersgd", powerSGD_hook
    with a PowerSGDState made of args.powersgd_* (ddptrain's dist.powersgd_* keys of the same names); with
    args.powersgd_residual_norms, rank 0 writes there a line per step: the L2 norm of its state's error_dict (the
    error-feedback residuals) after that step, in float64."""
    import contextlib
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    ddp = DDP(model, find_unused_parameters=bool(getattr(args, "find_unused", 0)),
              static_graph=bool(getattr(args, "static_graph", 0)))
    compress_hook = {"fp16": default_hooks.fp16_compress_hook,
                     "bf16": default_hooks.bf16_compress_hook}.get(getattr(args, "compress", ""))
    if compress_hook is not None:
        ddp.register_comm_hook(None, compress_hook)
    powersgd_state, residual_norms = None, []
    if getattr(args, "compress", "") == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
        state = powersgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start_step, min_compression_rate=args.powersgd_min_compression_rate,
            use_error_feedback=bool(args.powersgd_error_feedback), warm_start=bool(args.powersgd_warm_start),
            orthogonalization_epsilon=args.powersgd_epsilon, random_seed=args.powersgd_seed)
        if getattr(args, "powersgd_transposed_products", 0):
            powersgd.torch = TransposedProducts()
        ddp.register_comm_hook(state, one_bucket_at_a_time(powersgd.powerSGD_hook))
        powersgd_state = state
    dataset = TensorDataset(inputs, labels)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    if getattr(args, "ra_reps", 0) > 1:  # torchvision's references/classification/sampler.py, as tests hold it
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
        from ra_sampler_reference import RASampler
        sampler = RASampler(dataset, shuffle=True, seed=args.seed, repetitions=args.ra_reps)
    if getattr(args, "label_smoothing", 0.0) > 0:
        loss_fn = functools.partial(F.cross_entropy, label_smoothing=args.label_smoothing)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)
    opt = reference_optimizer(optimizer_params(model, args), args)
    ema = None
    ema_steps, ema_restart_through = getattr(args, "ema_steps", 1), getattr(args, "ema_restart_through", 0)
    warmup, warmup_factor = getattr(args, "warmup_steps", 0), getattr(args, "warmup_start_factor", 0.0)
    if getattr(args, "ema_decay", 0) > 0:
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
        decay = args.ema_decay
        if getattr(args, "ema_adjust_epochs", 0):
            adjust = dist.get_world_size() * args.batch * ema_steps / args.ema_adjust_epochs
            decay = 1.0 - min(1.0, (1.0 - decay) * adjust)
        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(getattr(args, "amp", ""))
    scaler = torch.amp.GradScaler("cpu") if amp_dtype == torch.float16 else None
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            if warmup:
                for group in opt.param_groups:
                    group["lr"] = args.lr * (warmup_factor + (1 - warmup_factor) * step / warmup) if step < warmup \
                        else args.lr
            opt.zero_grad()
            with torch.autocast("cpu", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext():
                out = ddp(xb)
            loss = loss_fn(out.float(), yb)
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            if ema is not None and i % ema_steps == 0:
                ema.update_parameters(model)
                if step + 1 <= ema_restart_through:
                    ema.n_averaged.fill_(0)
            step += 1
            if powersgd_state is not None and getattr(args, "powersgd_residual_norms", "") and dist.get_rank() == 0:
                residual_norms.append(sum(float(e.double().square().sum()) for e in powersgd_state.error_dict.values())
                                      ** 0.5)
            if step == args.steps:
                break
        epoch += 1
    if residual_norms:
        with open(args.powersgd_residual_norms, "w") as f:
            f.writelines(f"{norm!r}\n" for norm in residual_norms)
    if dist.get_rank() == 0:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, args.out)  # CPU tensors from any device
        if ema is not None:
            torch.save(dict(ema.module.state_dict()), args.ema_out)
    del ddp, opt, loader  # the last references to the DDP module and its Reducer
    leave_process_group()


def one_bucket_at_a_time(hook):
    """A DDP comm hook whose future is waited for before the next bucket's hook runs. powerSGD_hook starts its P and
    Q all-reduces from its futures' callbacks, on the thread that completed the one before: with several buckets in
    flight the ranks issue their collectives in different orders, which Gloo does not survive ("Received data size
    doesn't match expected size"). Waiting changes no number: each all-reduce sums the same tensors."""
    def waited(state, bucket):
        fut = hook(state, bucket)
        fut.wait()
        return fut
    return waited


class TransposedProducts:
    """The torch module as powerSGD_hook sees it, but for its products P = M Q and Q = M^T P and its decompression
    P Q^T of float32 tensors on the CPU, which are computed as ddptrain computes them (distributed/powersgd_hook.cpp):
    P = M Q (M's rows contiguous, rank <= 4) row by row, element j of a row times Q's row j added to partial sum
    j mod 8, the eight partial sums then added pairwise ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)); Q = M^T P
    (and P = M Q above rank 4) as the transposed result b^T a^T, from a contiguous copy of b^T, copied back; the
    decompression as the sum of the r outer products P[:, k] Q[:, k]^T in the order of k. Each product and each sum is
    rounded to float32 (no fused multiply-add)."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def bmm(a, b, out):
        if out.is_cuda:
            return torch.bmm(a, b, out=out)
        if a.size(2) <= out.size(2):
            if out.dtype != torch.float32:
                return torch.bmm(a, b, out=out)
            total = a[:, :, 0:1] * b[:, 0:1, :]
            for k in range(1, a.size(2)):
                total = total + a[:, :, k:k + 1] * b[:, k:k + 1, :]
            return out.copy_(total)
        for i in range(out.size(0)):
            if a.stride(2) == 1 and out.dtype == torch.float32 and out.size(2) <= 4:
                out[i].copy_(TransposedProducts.partial_sums_product(a[i], b[i]))
            else:
                out[i].copy_(torch.mm(b[i].t().contiguous(), a[i].t()).t())
        return out

    @staticmethod
    def partial_sums_product(m, q):
        """m q for an n x w m and a w x r q, each row's dot products in eight partial sums (element j to sum j mod 8,
        in the order of j) added pairwise at the end."""
        qt, width = q.t(), m.size(1)
        sums = torch.zeros(m.size(0), q.size(1), 8, dtype=m.dtype)
        for j in range(0, width, 8):
            end = min(j + 8, width)
            sums[:, :, :end - j] = sums[:, :, :end - j] + m[:, None, j:end] * qt[None, :, j:end]
        s = sums.unbind(2)
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))


def reference_optimizer(params, args):
    """torch.optim.SGD(lr, momentum, weight_decay), or with args.optimizer = "lars" or "lamb" timm.optim.Lars or Lamb
    with the hyperparameters args has (ddptrain's optimizer.* keys of the same names; foreach -1 = None)."""
    name, weight_decay = getattr(args, "optimizer", "sgd"), getattr(args, "weight_decay", 0.0)
    if name == "sgd":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum, weight_decay=weight_decay)
    import timm.optim
    foreach = None if args.foreach < 0 else bool(args.foreach)
    if name == "lars":
        return timm.optim.Lars(params, lr=args.lr, momentum=args.momentum, weight_decay=weight_decay,
                               nesterov=bool(args.nesterov), trust_coeff=args.trust_coeff, eps=args.eps,
                               trust_clip=bool(args.trust_clip), always_adapt=bool(args.always_adapt), foreach=foreach)
    return timm.optim.Lamb(params, lr=args.lr, eps=args.eps, weight_decay=weight_decay,
                           max_grad_norm=args.max_grad_norm or None, trust_clip=bool(args.trust_clip),
                           always_adapt=bool(args.always_adapt), foreach=foreach)


def leave_process_group():
    """dist.destroy_process_group() once every rank has come to it. Call it after dropping every reference to a
    DistributedDataParallel module: the module keeps the process group alive, and a Gloo group whose threads are
    destroyed only during interpreter shutdown can abort the process (SIGABRT, "terminate called without an active
    exception") after all its work is done."""
    import gc
    import torch.distributed as dist
    gc.collect()  # modules in reference cycles (forward hooks) go now, not at interpreter shutdown
    dist.barrier()
    dist.destroy_process_group()


# PowerSGDState's settings as the training scripts take them for --compress powersgd: ddptrain's dist.powersgd_* keys
# of the same names, with their defaults (PowerSGDState's); powersgd_transposed_products = 1 runs the hook with
# TransposedProducts.
POWERSGD_ARGUMENTS = [("compress", str, ""), ("powersgd_rank", int, 1), ("powersgd_start_step", int, 1000),
                      ("powersgd_min_compression_rate", float, 2.0), ("powersgd_error_feedback", int, 1),
                      ("powersgd_warm_start", int, 1), ("powersgd_epsilon", float, 0.0), ("powersgd_seed", int, 0),
                      ("powersgd_transposed_products", int, 0), ("powersgd_residual_norms", str, "")]

# The options the training scripts share (each may override a default): (name, type, default).
TRAINING_ARGUMENTS = [("data", str, None), ("init", str, None), ("batch", int, 16), ("lr", float, 0.05),
                      ("momentum", float, 0.0), ("seed", int, 0), ("mean", float, 0.1307), ("std", float, 0.3081),
                      ("weight_decay", float, 0.0), ("norm_weight_decay", float, -1.0),
                      ("bias_weight_decay", float, -1.0)]


def add_arguments(parser, table):
    """--name for each (name, type, default) of table; a name with underscores is also taken with dashes."""
    for name, kind, default in table:
        spellings = sorted({"--" + name, "--" + name.replace("_", "-")})
        parser.add_argument(*spellings, dest=name, type=kind, default=default)
    return parser


def parse_arguments(table, argv=None, parser=None):
    """TRAINING_ARGUMENTS overridden and extended by table (a later entry of the same name wins)."""
    merged = {name: (name, kind, default) for name, kind, default in TRAINING_ARGUMENTS}
    merged.update({name: (name, kind, default) for name, kind, default in table})
    return add_arguments(parser or argparse.ArgumentParser(), merged.values()).parse_args(argv)
