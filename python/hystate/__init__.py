"""hystate: hy's versioned, content-addressed, checksummed checkpoints for
PyTorch and numpy state, saved by many ranks and loaded on any number of
them. (The package is hystate, on PyPI and in `import`: `hy` is the Hy
Lisp dialect's.)

    import hystate
    step = hystate.save("ckpt", model.state_dict())          # every rank
    hystate.load("ckpt", model.state_dict())                 # in place, any ranks

A checkpoint directory (a run root) holds one store per saving rank,
<path>/node-<rank>/store, the layout `hyctl train` writes, so hyctl
inspect / verify / gc / export / diff read it too. Every call that
chooses a state takes a training step (`step=`, as hyctl's --step); a
step is committed on every rank's store or on none (two-phase commit:
rank 0's store decides). A store's internal version ids appear only where
asked for by name (`version_id=`, as hyctl's --version-id). The older
keywords (`version=`, `Checkpoints.versions()`, a positional version id in
`reshard`) still work for this release and warn (DeprecationWarning). Unchanged chunks are not written again, so a
second save of a state that changed a little writes little. Loading reads,
for each target, only the regions it holds, from whichever stores hold
them, so it needs the directory on storage every loading rank can read.

Errors are exceptions carrying hy's status: hystate.Error (with .code) and
hystate.InvalidArgument, hystate.NotFound, hystate.AlreadyExists, hystate.FailedPrecondition,
hystate.DataLoss, hystate.IOError, hystate.Unavailable, hystate.Aborted, ...
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple


def _load_extension():
    """Imports hystate._hy with RTLD_DEEPBIND: the module's C++ runtime calls
    bind to its own dependencies (libstdc++.so.6), ahead of what the process
    put in its global scope. PyTorch's libraries export copies of parts of
    libstdc++ (std::filesystem, strings), and torch imported with
    TORCH_USE_RTLD_GLOBAL=1 puts them there: hy's std::filesystem calls
    would then run torch 2.11 libtorch.so's remove_all, which jumps to
    address 0. HY_NO_DEEPBIND=1 imports it plainly (AddressSanitizer does
    not support RTLD_DEEPBIND)."""
    deepbind = getattr(os, "RTLD_DEEPBIND", 0)
    if os.environ.get("HY_NO_DEEPBIND") == "1":
        deepbind = 0
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | deepbind)
    try:
        from . import _hy as module
    finally:
        sys.setdlopenflags(flags)
    return module


_hy = _load_extension()

from ._crash import crash_point  # noqa: E402
from ._group import Group  # noqa: E402 (after the extension, on purpose)
from ._values import Shard, leaves, split  # noqa: E402

__version__: str = _hy.__version__

Error = _hy.Error
InvalidArgument = _hy.InvalidArgument
NotFound = _hy.NotFound
AlreadyExists = _hy.AlreadyExists
FailedPrecondition = _hy.FailedPrecondition
DataLoss = _hy.DataLoss
IOError = _hy.IOError  # noqa: A001 (hy's, a subclass of OSError)
Unavailable = _hy.Unavailable
Aborted = _hy.Aborted
Internal = _hy.Internal
ResourceExhausted = _hy.ResourceExhausted
DeadlineExceeded = _hy.DeadlineExceeded

__all__ = [
    "Shard", "save", "save_async", "load", "open", "plan", "reshard",
    "SaveHandle",
    "Checkpoints", "Error", "InvalidArgument", "NotFound", "AlreadyExists",
    "FailedPrecondition", "DataLoss", "IOError", "Unavailable", "Aborted",
]

_OBJECTS_BLOB = "python.objects"


def _deprecated(old: str, new: str) -> None:
    """Warns a caller of the old keyword (two frames up: the user's call)."""
    warnings.warn(f"{old} is deprecated: use {new} (hy speaks of steps, as "
                  f"hyctl does); {old} goes in hy 0.2.0",
                  DeprecationWarning, stacklevel=3)


def _step_or_version(step: Optional[int], version: Optional[int],
                     what: str) -> Optional[int]:
    """`step`, or the deprecated `version=` that meant a step."""
    if version is None:
        return step
    _deprecated(f"{what}(version=)", f"{what}(step=)")
    if step is not None and int(step) != int(version):
        raise _hy.InvalidArgument(
            f"{what}: step={step} and version={version} disagree")
    return version


def _store_path(path: str, rank: int) -> str:
    return os.path.join(path, f"node-{rank}", "store")


def _raise_first(outcomes: List[Any], what: str) -> None:
    """Raises, on every rank, the first rank's error in `outcomes`."""
    for rank, o in enumerate(outcomes):
        if o and o.get("error"):
            code, message = o["error"]
            raise getattr(_hy, code, _hy.Error)(
                f"{what}: rank {rank}: {message}")


def _error(e: Exception) -> Tuple[str, str]:
    return (getattr(e, "code", "Internal"), str(e))


class SaveHandle:
    """A save whose data has been copied and is being written in the
    background. wait() is collective (every rank of the save calls it): it
    waits for every rank's part, commits the version on all stores or
    aborts it on all, and returns the step."""

    def __init__(self, group: Group, store: Any, handle: Any, version: int,
                 step: int):
        self._group, self._store, self._handle = group, store, handle
        self._version, self._step = version, step
        self._result: Optional[int] = None
        self.stats: Dict[str, int] = {}

    def done(self) -> bool:
        """True once this rank's part is written (wait() then only commits);
        never blocks, not collective."""
        return self._result is not None or self._handle.done()

    def wait(self) -> int:
        """Waits for every rank's part, then commits the step on every
        rank's store or on none; returns the step (and fills `stats`:
        logical, stored and new bytes). Collective. Raises Aborted on every
        rank when some rank's part could not be written (its error in the
        message; the step is left on no store), and as the stores raise
        for a failure of the commit itself."""
        if self._result is not None:
            return self._result
        g = self._group
        mine: Dict[str, Any] = {}
        try:
            mine["stats"] = self._handle.wait()
        except _hy.Error as e:
            mine["error"] = _error(e)
        crash_point("save.prepared", g.rank)
        outcomes = g.all_gather(mine)
        failed = [f"rank {r}: {o['error'][1]}" for r, o in enumerate(outcomes)
                  if o.get("error")]
        totals = {k: sum(o.get("stats", {}).get(k, 0) for o in outcomes)
                  for k in ("logical_bytes", "stored_bytes", "new_bytes")}
        decision = None
        if g.rank == 0:
            why = "; ".join(failed)
            if not failed:
                try:
                    self._commit(totals)
                except _hy.Error as e:
                    why = f"rank 0's commit: {e}"
            if why:
                try:
                    self._store.abort(self._version)
                except _hy.Error:
                    pass
            decision = {"commit": not why, "why": why}
            if not why:
                crash_point("save.decided", g.rank)
        decision = g.all_gather(decision)[0]
        if not decision["commit"]:
            if g.rank != 0 and "error" not in mine:
                self._store.abort(self._version)
            raise _hy.Aborted(
                f"step {self._step} was not saved: {decision['why']}")
        if g.rank != 0:
            crash_point("save.before_follow", g.rank)
            self._commit(totals)
            crash_point("save.followed", g.rank)
        self.stats = dict(mine.get("stats", {}))
        self.stats["total_new_bytes"] = totals["new_bytes"]
        self._result = self._step
        return self._step

    def _commit(self, totals: Dict[str, int]) -> None:
        self._store.commit(self._version, self._step, self._group.world,
                           self._group.rank, f"python:ranks={self._group.world}",
                           totals["logical_bytes"], totals["stored_bytes"],
                           totals["new_bytes"], int(time.time() * 1000))


def _begin_save(path: str, state_dict: dict, step: Optional[int],
                group: Any, chunk_bytes: int) -> Tuple[Any, ...]:
    """What save and save_async share: checks the state on every rank,
    opens this rank's store, chooses the version and settles what a killed
    save left. Returns (group, store, version, step, shards, blobs)."""
    g = Group(group)
    info: Dict[str, Any] = {}
    store = None
    try:
        pieces, plain = split(state_dict, writable=False)
        store = _hy.Store(_store_path(path, g.rank), create=True,
                          read_only=False, chunk_bytes=chunk_bytes)
        info["versions"] = store.versions()
    except _hy.Error as e:
        info["error"] = _error(e)
    infos = g.all_gather(info)
    _raise_first(infos, f"saving to {path}")
    versions = [v for i in infos for v in i["versions"]]
    committed = sorted({v["step"] for v in versions if v["committed"]})
    if step is None:
        step = committed[-1] + 1 if committed else 0
    elif step in committed:
        raise _hy.AlreadyExists(f"step {step} is already committed in {path}")
    gens = [_hy.version_generation(v["version"]) for v in versions
            if v["step"] == step]
    version = _hy.version_id(int(step), max(gens) + 1 if gens else 0)
    # What a killed save left prepared here: committed where rank 0's store
    # committed it, else given up.
    decided = {v["version"]: v for v in infos[0]["versions"] if v["committed"]}
    for v in info["versions"]:
        if v["committed"] or v["aborted"] or not v["prepared"]:
            continue
        if v["version"] in decided and g.rank != 0:
            d = decided[v["version"]]
            store.commit(v["version"], d["step"], d["world_size"], g.rank,
                         "python", 0, 0, 0, int(time.time() * 1000))
        else:
            store.abort(v["version"])
    blobs = []
    if g.rank == 0:
        blobs.append((_OBJECTS_BLOB, -1, json.dumps(plain).encode()))
    return g, store, version, int(step), [p.for_save() for p in pieces], blobs


class _Saved:
    """A part saved in place (hystate.save): a handle that is already done."""

    def __init__(self, store: Any, version: int, rank: int, shards: list,
                 blobs: list):
        self._stats: Dict[str, int] = {}
        self._error: Optional[Exception] = None
        try:
            self._stats = store.save(version, rank, shards, blobs)
        except _hy.Error as e:
            self._error = e

    def done(self) -> bool:
        return True

    def wait(self) -> Dict[str, int]:
        if self._error is not None:
            raise self._error
        return self._stats


def save_async(path: str, state_dict: dict, step: Optional[int] = None,
               group: Any = None, chunk_bytes: int = 0) -> SaveHandle:
    """Starts a save: checks the state on every rank, copies this rank's
    tensors and returns; the writing goes on in the background. Collective.
    step=None takes one above the newest committed step (0 at first).
    chunk_bytes: the unit of deduplication (default 4 MiB, a multiple of 8):
    smaller finds more unchanged data between saves and costs more index.
    Raises InvalidArgument (on every rank) for a state that cannot be saved,
    AlreadyExists for a step committed already; nothing is written then."""
    g, store, version, step, shards, blobs = _begin_save(
        path, state_dict, step, group, chunk_bytes)
    handle = store.save_async(version, g.rank, shards, blobs)
    return SaveHandle(g, store, handle, version, step)


def save(path: str, state_dict: dict, step: Optional[int] = None,
         group: Any = None, chunk_bytes: int = 0) -> int:
    """Saves `state_dict` (this rank's part) and commits it across the
    group's ranks; returns the step. Collective. Blocking, like torch.save:
    the store reads the tensors where they are (no copy), so they must not
    change until it returns. Raises as save_async, and Aborted (on every
    rank) when some rank's part could not be written."""
    g, store, version, step, shards, blobs = _begin_save(
        path, state_dict, step, group, chunk_bytes)
    saved = _Saved(store, version, g.rank, shards, blobs)
    return SaveHandle(g, store, saved, version, step).wait()


def load(path: str, state_dict: dict, step: Optional[int] = None,
         group: Any = None, *, version: Optional[int] = None) -> int:
    """Fills `state_dict`'s tensors, arrays and Shards in place (and
    replaces its plain values) from step `step`, or the newest step
    committed with every part readable; returns the step. Each target reads
    only the regions it holds, whatever ranks saved them. Not collective
    (`group` is accepted for symmetry). Raises NotFound for a missing
    tensor or step, InvalidArgument for a dtype or shape that differs from
    the saved one, DataLoss for damaged data; targets are checked before
    anything is written into them. `version=` is the deprecated name of
    `step=`."""
    del group
    step = _step_or_version(step, version, "hystate.load")
    if _hy.path_kind(path) != "run_root":
        raise _hy.NotFound(f"no hy checkpoint under {path}")
    reader = _hy.Reader(path, -1 if step is None else int(step))
    pieces, plain = split(state_dict, writable=True)
    metas = reader.tensors()
    for p in pieces:
        if p.name not in metas:
            raise _hy.NotFound(
                f"tensor '{p.name}' is not in step {reader.step} of {path}")
        dtype, shape = metas[p.name]
        if dtype != p.dtype:
            raise _hy.InvalidArgument(
                f"{p.name}: saved as {dtype}, the target is {p.dtype}")
        if list(shape) != list(p.global_shape):
            raise _hy.InvalidArgument(
                f"{p.name}: saved with shape {list(shape)}, the target's "
                f"(global) shape is {p.global_shape}")
    objects = json.loads(reader.blob(_OBJECTS_BLOB)) if plain else {}
    for name in plain:
        if name not in objects:
            raise _hy.NotFound(f"value '{name}' is not in step {reader.step}")
    for p in pieces:
        reader.read(p.name, p.runs, p.array.reshape(-1).view("uint8"))
    for parent, key, name, value in list(leaves(state_dict)):
        if name in plain:
            parent[key] = objects[name]
    return reader.step


class Checkpoints:
    """The stores of one checkpoint directory (hystate.open)."""

    def __init__(self, path: str):
        self.path = path
        self._root = None
        if _hy.path_kind(path) == "run_root":
            self._root = _hy.RunRoot(path)
            self._stores = sorted(s["path"] for s in self._root.stores())
        elif os.path.isdir(path):
            self._stores = [path]
        else:
            raise _hy.NotFound(f"{path} does not exist")

    def stores(self) -> List[str]:
        """The paths of the directory's stores (node-<n>/store and replicas),
        sorted; the directory itself when it is a single store."""
        return list(self._stores)

    def _versions(self) -> Dict[str, List[dict]]:
        return {s: _hy.Store(s).versions() for s in self._stores}

    def steps(self) -> List[int]:
        """The committed steps, ascending. Raises FailedPrecondition for a
        directory whose stores belong to two runs."""
        if self._root is not None:
            return list(self._root.steps())
        return sorted({v["step"] for vs in self._versions().values()
                       for v in vs if v["committed"]})

    def versions(self) -> List[int]:
        """Deprecated: steps() (it always returned the committed steps)."""
        _deprecated("Checkpoints.versions()", "Checkpoints.steps()")
        return self.steps()

    def tensors(self, step: Optional[int] = None, *,
                version: Optional[int] = None) -> Dict[str, tuple]:
        """name -> (dtype name, global shape) of a step (default: newest).
        Raises NotFound for a step that is not committed. `version=` is the
        deprecated name of `step=`."""
        step = _step_or_version(step, version, "Checkpoints.tensors")
        if len(self._stores) == 1 and self._stores[0] == self.path:
            store = _hy.Store(self.path)
            vs = [v for v in store.versions() if v["committed"] and (
                step is None or v["step"] == step)]
            if not vs:
                raise _hy.NotFound(f"step {step} is not committed")
            return {k: (d, list(s)) for k, (d, s) in
                    store.tensors(vs[-1]["version"]).items()}
        reader = _hy.Reader(self.path, -1 if step is None else step)
        return {k: (d, list(s)) for k, (d, s) in reader.tensors().items()}

    def verify(self) -> Dict[str, Any]:
        """Checks every chunk of every committed version of every store.
        Returns {store: {step: chunks checked}}; raises DataLoss naming the
        bad chunks."""
        report: Dict[str, Any] = {}
        bad = []
        for s, vs in self._versions().items():
            store = _hy.Store(s)
            report[s] = {}
            for v in vs:
                if not v["committed"]:
                    continue
                r = store.verify(v["version"])
                report[s][v["step"]] = r["chunks_checked"]
                bad += [f"{s} step {v['step']}: {b}" for b in r["bad"]]
        if bad:
            raise _hy.DataLoss("bad chunks: " + "; ".join(bad))
        return report

    def gc(self, keep_last: int = 1) -> Dict[str, Any]:
        """Keeps the newest `keep_last` committed steps in every store and
        drops the rest (their chunks no other step uses). Returns what each
        store freed. Raises InvalidArgument for keep_last < 1, IOError when
        a store cannot be written."""
        if keep_last < 1:
            raise _hy.InvalidArgument("keep_last must be >= 1")
        return {s: _hy.Store(s, read_only=False).gc(keep_last)
                for s in self._stores}


def plan(tensors: Any, src: str, dst: str, rules: Optional[str] = None,
         ranks_per_node: int = 8, bucket_mib: float = 64.0) -> Dict[str, Any]:
    """The transfer plan that moves a model from layout `src` to `dst`
    (e.g. "fsdp=8" -> "tp=2,dp=4"), as `hyctl plan` prints it: bytes that
    stay local, cross nodes, per-rank peaks, steps. `tensors` is a state
    dict (tensors / arrays: their dtypes and shapes), a list of
    (name, dtype name, shape), or a directory from hystate.save (its newest
    step). `rules`: split rules as YAML (default: the shipped Llama/Qwen2
    rules). Raises InvalidArgument for a layout or tensor that does not
    fit."""
    if isinstance(tensors, str):
        tensors = [(n, d, s) for n, (d, s) in open(tensors).tensors().items()]
    elif isinstance(tensors, dict):
        pieces, _ = split(tensors, writable=False)
        tensors = [(p.name, p.dtype, p.global_shape) for p in pieces]
    return _hy.plan(list(tensors), src, dst, rules or "", ranks_per_node,
                    bucket_mib)


def reshard(store: str, to: Any = None, *args: Any, step: Optional[int] = None,
            version_id: Optional[int] = None, rules: Optional[str] = None,
            new_version_id: Optional[int] = None,
            **deprecated: Any) -> Dict[str, Any]:
    """Commits step `step` (default: the newest committed) of a store that
    holds every rank (one written by `hyctl import`, `hyctl reshard` or a
    shared-store job) cut for layout `to` (e.g. "tp=2,dp=2") as a new
    version of the same step, like `hyctl reshard`: the tensors in the
    recorded order, split by `rules` (YAML; default: the recorded rules,
    else the shipped Llama/Qwen2 rules). `version_id=` picks the store's
    internal version id instead of a step (as hyctl's --version-id); the
    new version's id is `new_version_id`, else the one after every version
    the store holds. Unchanged chunks are not written again. Returns what
    was committed (step, version, tensors, bytes, chunks, per-rank blobs
    that could not carry over). Raises InvalidArgument for a layout or
    rules that do not fit or for both step and version_id, NotFound for a
    step or version id the store has not committed, FailedPrecondition for
    one rank's store of a multi-store checkpoint (hystate.save's directories:
    hystate.load already reads those under any sharding), AlreadyExists for a
    taken new_version_id; nothing is left half written.

    The older form `reshard(store, version_id, to, rules, new_version)`
    (a positional internal version id, `new_version=`) still works and
    warns."""
    if isinstance(to, int) and not isinstance(to, bool):
        _deprecated("hystate.reshard(store, version, to)",
                    "hystate.reshard(store, to, step=...) or version_id=")
        if version_id is not None:
            raise _hy.InvalidArgument("hystate.reshard: two version ids given")
        rest = list(args)  # to, rules, new_version
        version_id, to = to, (rest.pop(0) if rest else None)
        if rest:
            rules = rest.pop(0)
        if rest:
            new_version_id = rest.pop(0)
        args = tuple(rest)
    if args:
        raise _hy.InvalidArgument("hystate.reshard: too many positional arguments")
    if "new_version" in deprecated:
        _deprecated("hystate.reshard(new_version=)", "new_version_id=")
        new_version_id = deprecated.pop("new_version")
    if "version" in deprecated:
        _deprecated("hystate.reshard(version=)", "step= or version_id=")
        version_id = deprecated.pop("version")
    if deprecated:
        raise TypeError("hystate.reshard: unexpected keyword arguments "
                        + ", ".join(sorted(deprecated)))
    if not isinstance(to, str):
        raise _hy.InvalidArgument("hystate.reshard: `to` (a layout such as "
                                  "'tp=2,dp=2') is required")
    if step is not None and version_id is not None:
        raise _hy.InvalidArgument(
            "hystate.reshard: give step or version_id, not both")
    versions = _hy.Store(store).versions()
    if version_id is None:
        committed = [v for v in versions
                     if v["committed"] and (step is None or
                                            v["step"] == int(step))]
        if not committed:
            raise _hy.NotFound(
                f"{store}: " + ("no committed step" if step is None else
                                f"step {step} is not committed"))
        version_id = committed[-1]["version"]
    done = _hy.reshard(store, int(version_id), to, rules or "",
                       new_version_id)
    # The new version keeps the step of the one it was cut from.
    done.setdefault("step", next(
        (v["step"] for v in versions if v["version"] == int(version_id)),
        None))
    return done


def open(path: str) -> Checkpoints:  # noqa: A001 (hystate.open, like io.open)
    """The checkpoint directory (or single store) at `path`. Raises
    NotFound when it does not exist; nothing is opened until a method
    needs it."""
    return Checkpoints(path)
