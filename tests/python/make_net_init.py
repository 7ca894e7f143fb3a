# Writes a freshly initialised classic Net's state dict (plain dict) for tests: make_net_init.py OUT SEED
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
from torch_reference import Net  # noqa: E402

torch.manual_seed(int(sys.argv[2]))
torch.save(dict(Net(0.0).state_dict()), sys.argv[1])
