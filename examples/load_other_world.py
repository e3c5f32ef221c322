"""Save on N ranks, load on M: each rank saves the rows it holds of a
tensor (hystate.Shard: the local piece, its offsets, the global shape) and
later loads the rows it holds in another world, read from whichever
ranks' stores hold them.

    torchrun --nproc-per-node 4 examples/load_other_world.py --dir /tmp/w save
    torchrun --nproc-per-node 3 examples/load_other_world.py --dir /tmp/w load

hystate.save is collective over torch.distributed's default group (made
from torchrun's environment if the script has not made it); hystate.load
is not collective.
"""

import argparse
from typing import Any, Dict, Tuple

import torch
import torch.distributed as dist

import hystate

ROWS, COLS = 1000, 64


def my_rows(rank: int, world: int) -> Tuple[int, int]:
    """torch.chunk's split of ROWS rows (DTensor's Shard(0))."""
    size = -(-ROWS // world)
    lo = min(rank * size, ROWS)
    return lo, min(lo + size, ROWS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("mode", choices=["save", "load"])
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    lo, hi = my_rows(rank, world)
    whole = torch.arange(ROWS * COLS, dtype=torch.float32).view(ROWS, COLS)
    if a.mode == "save":
        state: Dict[str, Any] = {
            "w": hystate.Shard(whole[lo:hi].clone(), [lo, 0], [ROWS, COLS]),
            "note": f"saved on {world} ranks"}
        step = hystate.save(a.dir, state)
        if rank == 0:
            print(f"saved step {step} on {world} ranks")
    else:
        mine = torch.zeros(hi - lo, COLS)
        state = {"w": hystate.Shard(mine, [lo, 0], [ROWS, COLS]),
                 "note": ""}
        step = hystate.load(a.dir, state)
        assert torch.equal(mine, whole[lo:hi]), f"rank {rank}: rows differ"
        print(f"rank {rank} of {world}: rows {lo}..{hi} of step {step} "
              f"({state['note']}) load bit for bit")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
