"""Look into a checkpoint directory (hystate.save's, hystate.dcp's or a
hyctl train run root): its stores, committed steps and tensors; check every
stored chunk against its checksum; keep only the newest steps.

    python examples/inspect_and_verify.py /tmp/ckpt [--keep-last 2]

A damaged chunk is hystate.DataLoss naming it (hyctl repair can restore it
from a replica); nothing is ever read back wrong.
"""

import argparse
import sys

import hystate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--keep-last", type=int, default=0,
                    help="then drop all but the newest N steps (0: keep all)")
    a = ap.parse_args()
    cp = hystate.open(a.dir)
    steps = cp.steps()
    print(f"{a.dir}: {len(cp.stores())} store(s), steps {steps}")
    if not steps:
        return 0
    for name, (dtype, shape) in sorted(cp.tensors(step=steps[-1]).items()):
        print(f"  step {steps[-1]}  {name:<40} {dtype:<5} {shape}")
    try:
        checked = cp.verify()
    except hystate.DataLoss as e:
        print(f"damaged: {e}", file=sys.stderr)
        return 3
    chunks = sum(n for by_step in checked.values() for n in by_step.values())
    print(f"verified {chunks} chunks")
    if a.keep_last > 0:
        cp.gc(keep_last=a.keep_last)
        print(f"kept steps {cp.steps()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
