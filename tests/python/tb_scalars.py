# Every scalar of a TensorBoard log directory as TensorBoard itself loads it (PyPI tensorboard's EventAccumulator).
"""Usage: tb_scalars.py LOGDIR

Loads LOGDIR with tensorboard.backend.event_processing.event_accumulator.EventAccumulator, keeping every scalar
(size_guidance 0 = all), and prints one tab-separated line per scalar event: TAG STEP VALUE (VALUE as repr()).
Exit 1 when the directory holds no scalars.
"""
import sys

from tensorboard.backend.event_processing import event_accumulator


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    acc = event_accumulator.EventAccumulator(argv[0], size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    if not tags:
        print("tb_scalars: no scalars in %s" % argv[0], file=sys.stderr)
        return 1
    for tag in sorted(tags):
        for event in acc.Scalars(tag):
            print("%s\t%d\t%r" % (tag, event.step, event.value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
