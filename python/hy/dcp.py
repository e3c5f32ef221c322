"""hy stores as a storage backend of torch.distributed.checkpoint (DCP,
PyTorch >= 2.0):

    import torch.distributed.checkpoint as dcp
    from hy.dcp import HyStorageWriter, HyStorageReader
    dcp.save(state_dict, storage_writer=HyStorageWriter("ckpt"))
    dcp.load(state_dict, storage_reader=HyStorageReader("ckpt"))

The directory is a run root like hy.save's (one store per writing rank,
<path>/node-<rank>/store), so saves are content-addressed (unchanged chunks
are not written again), checksummed, compressed and atomic: every DCP save
is a new step, committed on every rank's store or on none. DCP's metadata
(its pickled Metadata) goes to <path>/dcp/<step>.metadata before the
commit. Loading reads, for each item DCP asks for, only that region, from
whichever rank's store holds it, so any number of ranks and any sharding
load it (the directory must be readable by every loading rank).

Protocol: the coordinator picks the step in prepare_global_plan (one above
its store's newest); every rank writes and prepares its part in
write_data; the coordinator's finish writes the metadata, commits its own
store (the decision) and then copies the commit record into the other
ranks' stores (they closed theirs after preparing). A failure between
those leaves parts prepared; the next save settles them (hy.save does).

Status: written against DCP's StorageWriter / StorageReader of PyTorch
2.x; Debian's torch 1.13 has no usable DCP, so it is exercised only where
PyTorch >= 2.0 is installed (tests/python/test_dcp.py, scripts/py-check.sh).
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import time
from typing import Any, List, Optional, Union

import torch
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import (LoadItemType, LoadPlan,
                                                  LoadPlanner, SavePlan,
                                                  SavePlanner, WriteItemType)
from torch.distributed.checkpoint.storage import (StorageReader,
                                                  StorageWriter, WriteResult)
from torch.futures import Future

from . import _hy
from . import _store_path
from ._values import as_array

_GEN_BITS = 16


def _rank() -> int:
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() \
        else 0


def _store(path: str, rank: int, writable: bool = True,
           chunk_bytes: int = 0):
    return _hy.Store(_store_path(path, rank), create=writable,
                     read_only=not writable, chunk_bytes=chunk_bytes)


def _done(value: Any) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class HyStorageWriter(StorageWriter):
    def __init__(self, path: Union[str, os.PathLike], chunk_bytes: int = 0):
        super().__init__()
        self.path = os.fspath(path)
        self.chunk_bytes = chunk_bytes
        self.is_coordinator = False
        self.rank = 0

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return isinstance(checkpoint_id, (str, os.PathLike))

    def set_up_storage_writer(self, is_coordinator: bool, *args, **kwargs):
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank", _rank())

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        versions = _store(self.path, self.rank).versions()
        committed = [v["step"] for v in versions if v["committed"]]
        step = max(committed) + 1 if committed else 0
        gens = [v["version"] & ((1 << _GEN_BITS) - 1) for v in versions
                if v["step"] == step]
        version = (step << _GEN_BITS) | (max(gens) + 1 if gens else 0)
        data = {"step": step, "version": version, "world": len(plans)}
        return [dataclasses.replace(p, storage_data=data) for p in plans]

    def write_data(self, plan: SavePlan,
                   planner: SavePlanner) -> Future:
        self._plan_data = plan.storage_data
        shards, blobs, results, keep = [], [], [], []
        for item in plan.items:
            data = planner.resolve_data(item)
            fqn = item.index.fqn
            if item.type == WriteItemType.BYTE_IO:
                raw = data.getvalue() if isinstance(data, io.BytesIO) \
                    else bytes(data)
                blobs.append((f"dcp/{fqn}", self.rank, raw))
                results.append(WriteResult(item.index, len(raw),
                                           {"rank": self.rank}))
                continue
            t = data.detach().cpu().contiguous()
            keep.append(t)
            array, dtype = as_array(t, fqn, writable=False)
            chunk = item.tensor_data.chunk
            shards.append((fqn, dtype, list(item.tensor_data.size),
                           _hy.box_geometry(list(chunk.offsets),
                                            list(chunk.sizes)),
                           array.reshape(-1).view("uint8")))
            results.append(WriteResult(item.index,
                                       t.numel() * t.element_size(),
                                       {"rank": self.rank}))
        store = _store(self.path, self.rank, chunk_bytes=self.chunk_bytes)
        store.save(self._plan_data["version"], self.rank, shards, blobs)
        del store  # The coordinator commits it in finish().
        return _done(results)

    def finish(self, metadata: Metadata,
               results: List[List[WriteResult]]) -> None:
        d = self._plan_data
        step, version, world = d["step"], d["version"], d["world"]
        meta_dir = os.path.join(self.path, "dcp")
        os.makedirs(meta_dir, exist_ok=True)
        final = os.path.join(meta_dir, f"{step}.metadata")
        with open(final + ".tmp", "wb") as f:
            pickle.dump(metadata, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(final + ".tmp", final)
        now = int(time.time() * 1000)
        ranks = sorted({wr.storage_data["rank"] for rs in results
                        for wr in rs} | {self.rank})
        total = sum(wr.size_in_bytes for rs in results for wr in rs)
        # The decision first (the coordinator's store), then the copies.
        order = [self.rank] + [r for r in ranks if r != self.rank]
        for r in order:
            _store(self.path, r).commit(version, step, world, r,
                                        f"dcp:ranks={world}", total, 0, 0,
                                        now)

    def storage_meta(self):
        try:
            from torch.distributed.checkpoint.metadata import StorageMeta
        except ImportError:
            return None
        return StorageMeta(checkpoint_id=self.path)


class HyStorageReader(StorageReader):
    def __init__(self, path: Union[str, os.PathLike],
                 step: Optional[int] = None):
        super().__init__()
        self.path = os.fspath(path)
        self.step = step
        self._reader = None

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self._reader = None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return isinstance(checkpoint_id, (str, os.PathLike)) and \
            os.path.isdir(os.path.join(os.fspath(checkpoint_id), "dcp"))

    def read_metadata(self) -> Metadata:
        self._reader = _hy.Reader(self.path,
                                  -1 if self.step is None else self.step)
        self.step = self._reader.step
        path = os.path.join(self.path, "dcp", f"{self.step}.metadata")
        if not os.path.exists(path):
            raise _hy.NotFound(f"step {self.step} of {self.path} has no DCP "
                               "metadata (not saved through hy.dcp)")
        with open(path, "rb") as f:
            return pickle.load(f)

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool,
                              *args, **kwargs) -> None:
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        if self._reader is None:
            self.read_metadata()
        for item in plan.items:
            fqn = item.storage_index.fqn
            if item.type == LoadItemType.BYTE_IO:
                rank = self.storage_data[item.storage_index]["rank"]
                raw = self._reader.blob_of(f"dcp/{fqn}", rank)
                planner.load_bytes(item, io.BytesIO(raw))
                continue
            target = planner.resolve_tensor(item).detach()
            offsets = [a + b for a, b in zip(item.storage_index.offset,
                                             item.storage_offsets)]
            lengths = list(item.lengths)
            dtype, shape = self._reader.tensors()[fqn]
            tmp = torch.empty(lengths, dtype=target.dtype)
            array, _ = as_array(tmp, fqn, writable=True)
            self._reader.read(fqn, _hy.box_runs(offsets, lengths, list(shape)),
                              array.reshape(-1).view("uint8"))
            target.copy_(tmp)
            planner.commit_tensor(item, target)
        return _done(None)
