# torchrun's parsed flags for cases of environment and argv, as torch.distributed.run's own parser gives them.
"""Usage: torchrun_args.py CASES.json | torchrun_args.py --pet-names

CASES.json: a list of [env, argv] pairs (env: PET_* name -> value). For each case, with os.environ's PET_* variables
replaced by env, builds torch.distributed.run.get_args_parser() (its env / check_env actions read PET_<DEST> then)
and parses argv + ["prog"]; prints one line: nnodes=MIN:MAX nproc_per_node=N node_rank=R master_addr=A
master_port=P rdzv_backend=B rdzv_endpoint=E rdzv_id=I max_restarts=K standalone=0|1, or "error" when torchrun
refuses the case (argparse's exit, or a value its action cannot read).
--pet-names: one line "FLAG PET_<DEST>" for each option string of each flag whose action reads the environment
(torch.distributed.argparse_util's env and check_env).
"""
import contextlib
import io
import json
import os
import sys

from torch.distributed.argparse_util import check_env, env as env_action
from torch.distributed.run import get_args_parser, parse_min_max_nnodes


def parsed(env, argv):
    for name in [n for n in os.environ if n.startswith("PET_")]:
        del os.environ[name]
    os.environ.update(env)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            a = get_args_parser().parse_args(argv + ["prog"])
        lo, hi = parse_min_max_nnodes(a.nnodes)
        nproc = int(a.nproc_per_node)
    except (SystemExit, Exception):
        return "error"
    return (f"nnodes={lo}:{hi} nproc_per_node={nproc} node_rank={a.node_rank} master_addr={a.master_addr} "
            f"master_port={a.master_port} rdzv_backend={a.rdzv_backend} rdzv_endpoint={a.rdzv_endpoint} "
            f"rdzv_id={a.rdzv_id} max_restarts={a.max_restarts} standalone={int(bool(a.standalone))}")


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "--pet-names":
        for action in get_args_parser()._actions:
            if isinstance(action, (env_action, check_env)):
                for flag in action.option_strings:
                    print(flag, "PET_" + action.dest.upper())
        return 0
    with open(argv[0], encoding="utf-8") as f:
        for env, args in json.load(f):
            print(parsed(env, args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
