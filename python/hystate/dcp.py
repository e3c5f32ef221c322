"""hy stores as a storage backend of torch.distributed.checkpoint (DCP):

    import torch.distributed.checkpoint as dcp
    from hystate.dcp import HyStorageWriter, HyStorageReader
    dcp.save(state_dict, storage_writer=HyStorageWriter("ckpt"))
    dcp.load(state_dict, storage_reader=HyStorageReader("ckpt"))

Any state DCP saves works, e.g. get_state_dict() of a model wrapped with
FSDP2 (fully_shard: DTensor parameters and optimizer state): every rank
writes the chunks it holds, and any number of ranks, under any sharding,
loads them (tests/python/test_dcp.py: 4 ranks save, 3 load, bit for bit).

The directory is a run root like hystate.save's (one store per writing rank,
<path>/node-<rank>/store), so saves are content-addressed (unchanged chunks
are not written again), checksummed, compressed and atomic: every DCP save
is a new step (one above the newest committed one), committed on every
rank's store or on none. Tensors keep their DCP names (the flattened state
dict keys); non-tensor values (torch.save'd by DCP) are blobs of the rank
that wrote them. DCP's metadata (its pickled Metadata, with a checksum)
goes to <path>/dcp/<step>-<generation>.metadata before the commit.
Loading reads, for each item DCP asks for, only that region, from
whichever rank's store holds it (the directory must be readable by every
loading rank); a damaged chunk, blob or metadata file raises hystate.DataLoss
(wrapped in DCP's CheckpointException), never loads.

Protocol: each rank reports its store's versions in prepare_local_plan;
the coordinator picks the step and a version number no store has used in
prepare_global_plan; every rank settles what an earlier, interrupted save
left in its store (commits a part whose version some store committed,
aborts any other prepared part) and writes and prepares its part in
write_data; the coordinator's finish writes the metadata, commits its own
store (the decision) and then copies the commit record into the other
ranks' stores (they closed theirs after preparing). A save killed before
the decision leaves the previous step the newest one loadable; one killed
after it, while copying the decision, leaves the new step loadable: a
reader reads a part prepared in its store when the coordinator's store
holds the commit (writing nothing), and the next save copies the decision.

Needs DCP's collectives (use_collectives=True, the default) and a shared
directory; DefaultSavePlanner's enable_plan_caching is refused (a cached
plan would carry an old save's version).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import os
import pickle
import time
from typing import Any, Dict, List, Optional, Union

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
from ._crash import crash_point
from ._values import as_array

__all__ = ["HyStorageWriter", "HyStorageReader"]

_META_MAGIC = b"hy.dcp metadata v1 sha256="  # A format constant: kept.
_TORCH_DTYPES = {
    "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
    "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
    "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}


def _rank() -> int:
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() \
        else 0


def _store(path: str, rank: int, chunk_bytes: int = 0):
    return _hy.Store(_store_path(path, rank), create=True, read_only=False,
                     chunk_bytes=chunk_bytes)


def _metadata_path(path: str, step: int, version: int) -> str:
    gen = _hy.version_generation(version)
    return os.path.join(path, "dcp", f"{step}-{gen}.metadata")


def _layout(world: int) -> str:
    return f"dcp:ranks={world}"


def _done(value: Any) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class HyStorageWriter(StorageWriter):
    """Saves DCP's state into the hy run root `path` (a new step per save).
    chunk_bytes: hy's unit of deduplication (0: the store's default)."""

    def __init__(self, path: Union[str, os.PathLike], chunk_bytes: int = 0):
        super().__init__()
        self.path = os.fspath(path)
        self.chunk_bytes = chunk_bytes
        self.is_coordinator = False
        self.rank = 0
        self._plan_data: Optional[Dict[str, Any]] = None

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None):
        """DCP's hook before each save: `checkpoint_id`, if given, replaces
        the run root."""
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self._plan_data = None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return isinstance(checkpoint_id, (str, os.PathLike))

    def set_up_storage_writer(self, is_coordinator: bool, *args, **kwargs):
        """DCP's set-up: which rank this is. Raises InvalidArgument for
        use_collectives=False on several ranks (a step must commit on every
        rank's store or on none)."""
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank", _rank())
        if not kwargs.get("use_collectives", True):
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized() and \
                    dist.get_world_size() > 1:
                raise _hy.InvalidArgument(
                    "hystate.dcp needs DCP's collectives (use_collectives=True): "
                    "a step is committed on every rank's store or on none")

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        """Adds this rank's store's versions, for the coordinator's choice
        of step. Raises as opening the store does (IOError, DataLoss)."""
        # This rank's store's versions, for the coordinator's choice.
        versions = _store(self.path, self.rank).versions()
        return dataclasses.replace(
            plan, storage_data={"rank": self.rank, "versions": versions})

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        """The coordinator: the new step (after every committed one) and a
        version id no store has used, sent to every rank."""
        versions = [v for p in plans for v in p.storage_data["versions"]]
        committed = [v["step"] for v in versions if v["committed"]]
        step = max(committed) + 1 if committed else 0
        # A generation no store has used at this step (a killed save may
        # have prepared or aborted one on any rank's store).
        gens = [_hy.version_generation(v["version"]) for v in versions
                if _hy.version_step(v["version"]) == step]
        version = _hy.version_id(step, max(gens) + 1 if gens else 0)
        # Versions some store committed: the coordinator of their save
        # decided them (it commits its own store first).
        decided = {v["version"]: [v["step"], v["world_size"]]
                   for v in versions if v["committed"]}
        data = {"step": step, "version": version, "world": len(plans),
                "decided": decided}
        return [dataclasses.replace(p, storage_data=data) for p in plans]

    def _settle(self, store: Any, decided: Dict[int, list]) -> None:
        """Settles what an interrupted save left prepared in this rank's
        store: committed where that save's decision was made, else
        aborted."""
        for v in store.versions():
            if v["committed"] or v["aborted"] or not v["prepared"]:
                continue
            if v["version"] in decided:
                step, world = decided[v["version"]]
                store.commit(v["version"], step, world, self.rank,
                             _layout(world), 0, 0, 0,
                             int(time.time() * 1000))
            else:
                store.abort(v["version"])

    def write_data(self, plan: SavePlan,
                   planner: SavePlanner) -> Future:
        """Writes this rank's tensors and values into its store as a
        prepared (not yet committed) version. Raises InvalidArgument for a
        caching planner or a layout hy cannot store, IOError or
        ResourceExhausted when the store cannot be written."""
        if getattr(planner, "_enable_plan_caching", False):
            raise _hy.InvalidArgument(
                "hystate.dcp: the planner caches plans (enable_plan_caching); a "
                "cached plan carries an earlier save's version. Use a "
                "planner without plan caching")
        data = plan.storage_data
        if not isinstance(data, dict) or "version" not in data:
            raise _hy.InvalidArgument(
                "hystate.dcp: the save plan lacks HyStorageWriter's step (was "
                "prepare_global_plan skipped?)")
        self._plan_data = data
        shards, blobs, results = [], [], []
        seen = set()
        for item in plan.items:
            fqn = item.index.fqn
            if item.type == WriteItemType.BYTE_IO:
                obj = planner.resolve_data(item)
                raw = obj.getvalue() if isinstance(obj, io.BytesIO) \
                    else bytes(obj)
                blobs.append((f"dcp/{fqn}", self.rank, raw))
                results.append(WriteResult(item.index, len(raw),
                                           {"rank": self.rank}))
                continue
            chunk = item.tensor_data.chunk
            if math.prod(chunk.sizes) == 0:
                # An empty shard (a rank FSDP left without rows): nothing
                # to store; a load never asks for it.
                results.append(WriteResult(item.index, 0,
                                           {"rank": self.rank}))
                continue
            if fqn in seen:
                raise _hy.InvalidArgument(
                    f"hystate.dcp: rank {self.rank} holds two chunks of '{fqn}'; "
                    "a rank saves one box of a tensor")
            seen.add(fqn)
            t = planner.resolve_data(item).detach().cpu().contiguous()
            if list(t.shape) != list(chunk.sizes):
                raise _hy.InvalidArgument(
                    f"hystate.dcp: '{fqn}': the planner resolved a tensor of "
                    f"shape {list(t.shape)} for a chunk of "
                    f"{list(chunk.sizes)}")
            array, dtype = as_array(t, fqn, writable=False)
            shards.append((fqn, dtype, list(item.tensor_data.size),
                           _hy.box_geometry(list(chunk.offsets),
                                            list(chunk.sizes)),
                           array.reshape(-1).view("uint8")))
            results.append(WriteResult(item.index,
                                       t.numel() * t.element_size(),
                                       {"rank": self.rank}))
        store = _store(self.path, self.rank, self.chunk_bytes)
        self._settle(store, {int(k): v for k, v in data["decided"].items()})
        store.save(data["version"], self.rank, shards, blobs)
        del store  # Prepared; the coordinator commits it in finish().
        return _done(results)

    def finish(self, metadata: Metadata,
               results: List[List[WriteResult]]) -> None:
        """The coordinator: writes DCP's metadata (checksummed) and commits
        the step on its own store (the decision), then on every other
        rank's. Raises FailedPrecondition before write_data, IOError when a
        store cannot commit."""
        d = self._plan_data
        if d is None:
            raise _hy.FailedPrecondition(
                "hystate.dcp: finish() before write_data() on the coordinator")
        step, version, world = d["step"], d["version"], d["world"]
        # Which rank's store holds each non-tensor value (the reader's map).
        metadata.storage_data = {wr.index: wr.storage_data
                                 for rs in results for wr in rs}
        metadata.storage_meta = self.storage_meta()
        raw = pickle.dumps(metadata)
        final = _metadata_path(self.path, step, version)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        with open(final + ".tmp", "wb") as f:
            f.write(_META_MAGIC + hashlib.sha256(raw).hexdigest().encode() +
                    b"\n" + raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(final + ".tmp", final)
        now = int(time.time() * 1000)
        total = sum(wr.size_in_bytes for rs in results for wr in rs)
        # The decision first (the coordinator's store), then the copies.
        order = [self.rank] + [r for r in range(world) if r != self.rank]
        for i, r in enumerate(order):
            _store(self.path, r).commit(version, step, world, r,
                                        _layout(world), total, 0, 0, now)
            crash_point("dcp.decided" if i == 0 else "dcp.copied", self.rank)
        self._plan_data = None

    def storage_meta(self):
        """DCP's StorageMeta naming the run root (None before torch 2.4)."""
        try:
            from torch.distributed.checkpoint.metadata import StorageMeta
        except ImportError:  # Older than torch 2.4.
            return None
        return StorageMeta(checkpoint_id=self.path)


class HyStorageReader(StorageReader):
    """Loads step `step` (default: the newest step committed with every
    part readable) of the hy run root `path`, saved by HyStorageWriter."""

    def __init__(self, path: Union[str, os.PathLike],
                 step: Optional[int] = None):
        super().__init__()
        self.path = os.fspath(path)
        self.step = step
        self._reader = None
        self._tensors: Dict[str, tuple] = {}
        self.storage_data: Dict[Any, Any] = {}

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None):
        """DCP's hook before each load: `checkpoint_id`, if given, replaces
        the run root."""
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self._reader = None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return isinstance(checkpoint_id, (str, os.PathLike)) and \
            os.path.isdir(os.path.join(os.fspath(checkpoint_id), "dcp"))

    def _open(self) -> None:
        self._reader = _hy.Reader(self.path,
                                  -1 if self.step is None else self.step)
        self._tensors = self._reader.tensors()

    def read_metadata(self) -> Metadata:
        """DCP's metadata of the step. Raises NotFound for a missing step
        or one not saved through hystate.dcp, DataLoss for damaged
        metadata."""
        self._open()
        r = self._reader
        path = _metadata_path(self.path, r.step, r.version)
        if not os.path.exists(path):
            raise _hy.NotFound(
                f"step {r.step} of {self.path} has no DCP metadata ({path}): "
                "not saved through hystate.dcp")
        with open(path, "rb") as f:
            head = f.readline()
            raw = f.read()
        if not head.startswith(_META_MAGIC) or \
                head[len(_META_MAGIC):].strip().decode("ascii", "replace") \
                != hashlib.sha256(raw).hexdigest():
            raise _hy.DataLoss(f"{path}: damaged (its checksum does not "
                               "match) or not hystate.dcp's metadata")
        return pickle.loads(raw)

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool,
                              *args, **kwargs) -> None:
        """Which rank's store holds each non-tensor value."""
        self.storage_data = metadata.storage_data or {}

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        """The plan as DCP made it: every rank reads what it needs."""
        return plan

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        """The plans as DCP made them."""
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        """Reads each planned item's regions from whichever ranks' stores
        hold them, straight into DCP's targets. Raises NotFound for a
        tensor or value the step lacks, DataLoss for damaged data."""
        if self._reader is None:
            self._open()
        for item in plan.items:
            fqn = item.storage_index.fqn
            if item.type == LoadItemType.BYTE_IO:
                where = self.storage_data.get(item.storage_index)
                if where is None:
                    raise _hy.NotFound(
                        f"hystate.dcp: no rank of step {self._reader.step} holds "
                        f"the value '{fqn}'")
                raw = self._reader.blob_of(f"dcp/{fqn}", where["rank"])
                planner.load_bytes(item, io.BytesIO(raw))
                continue
            target = planner.resolve_tensor(item).detach()
            lengths = list(item.lengths)
            if math.prod(lengths) == 0:
                planner.commit_tensor(item, target)
                continue
            if fqn not in self._tensors:
                raise _hy.NotFound(f"hystate.dcp: no tensor '{fqn}' in step "
                                   f"{self._reader.step} of {self.path}")
            dtype, shape = self._tensors[fqn]
            saved = _TORCH_DTYPES.get(dtype)
            if saved is None:
                raise _hy.InvalidArgument(
                    f"hystate.dcp: '{fqn}' is saved as {dtype}, not a torch dtype")
            offsets = [a + b for a, b in zip(item.storage_index.offset,
                                             item.storage_offsets)]
            runs = _hy.box_runs(offsets, lengths, list(shape))
            if target.dtype == saved and target.is_contiguous() and \
                    target.device.type == "cpu":
                into = target  # Read straight into the destination.
            else:
                into = torch.empty(lengths, dtype=saved)
            array, _ = as_array(into, fqn, writable=True)
            self._reader.read(fqn, runs, array.reshape(-1).view("uint8"))
            if into is not target:
                target.copy_(into)
            planner.commit_tensor(item, target)
        return _done(None)
