# Writes a freshly initialised classic Net's state dict (plain dict) for tests: make_net_init.py OUT SEED
import sys

import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from ddp_reference import Net  # noqa: E402

torch.manual_seed(int(sys.argv[2]))
torch.save(dict(Net(0.0).state_dict()), sys.argv[1])
