# What torch.utils.tensorboard.SummaryWriter writes when a run resumes: SummaryWriter(LOGDIR, purge_step=STEP).
"""Usage: tb_purge_reference.py LOGDIR STEP

Opens torch's SummaryWriter(LOGDIR, purge_step=STEP), adds the scalar "x" = 1.0 at STEP, closes it and prints
the path of the event file it wrote.
"""
import glob
import os
import sys

from torch.utils.tensorboard import SummaryWriter


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    logdir, step = argv[0], int(argv[1])
    writer = SummaryWriter(logdir, purge_step=step)
    writer.add_scalar("x", 1.0, step)
    writer.close()
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    if len(files) != 1:
        print("tb_purge_reference: expected one event file in %s, found %d" % (logdir, len(files)), file=sys.stderr)
        return 1
    print(files[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
