"""The ranks a save spans: a torch.distributed process group, or one
process.

group=None uses the default group when torch.distributed is initialized;
when it is not but the environment names a world of several ranks
(torchrun: WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT), hy initializes the
default group with gloo from it, and destroys it at exit. Otherwise the
save is one rank's.
"""

from __future__ import annotations

import atexit
import os
from typing import Any, List


class Group:
    def __init__(self, group: Any = None):
        self.group = None
        self.rank, self.world = 0, 1
        dist = _dist()
        if group is None and dist is not None:
            if not dist.is_initialized() and int(
                    os.environ.get("WORLD_SIZE", "1")) > 1:
                dist.init_process_group("gloo")
                # The group hy made is hy's to end: one left to the
                # interpreter's teardown aborted the process now and then
                # ("terminate called without an active exception", rank 0,
                # 2 exits in 20 of a 2-rank hystate.save).
                atexit.register(_destroy, dist)
            if dist.is_initialized():
                group = dist.group.WORLD
        if group is not None:
            if dist is None:
                raise RuntimeError("a group needs torch.distributed")
            self.group = group
            self.rank = dist.get_rank(group)
            self.world = dist.get_world_size(group)

    def all_gather(self, obj: Any) -> List[Any]:
        """Every rank's `obj`, in rank order (collective)."""
        if self.world == 1:
            return [obj]
        out: List[Any] = [None] * self.world
        _dist().all_gather_object(out, obj, group=self.group)
        return out


    def send(self, tensor: Any, dst: int) -> None:
        """Sends a CPU tensor to group rank `dst` (which must recv it)."""
        dist = _dist()
        dist.send(tensor, self._global(dst), group=self.group)

    def recv(self, tensor: Any, src: int) -> None:
        """Fills a CPU tensor from what group rank `src` sends."""
        dist = _dist()
        dist.recv(tensor, self._global(src), group=self.group)

    def _global(self, rank: int) -> int:
        return _dist().get_global_rank(self.group, rank)


def _destroy(dist: Any) -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _dist():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() else None
