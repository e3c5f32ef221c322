"""Pushes a PyTorch model's weights into running vLLM engines, by version,
sending only what changed.

    from hystate.vllm import EngineSync
    sync = EngineSync(["http://127.0.0.1:8000"], api_key=key)
    for step in range(steps):
        train_step(model)
        sync.push(model.state_dict(), step)   # every rank

The engines are vLLM servers started as hy starts them, on rank 0's host:
``python -m hy_vllm.serve``, or ``vllm serve`` with hy_vllm on the path
and these flags:

    --worker-extension-cls hy_vllm.worker.HyWorkerExtension
    --weight-transfer-config '{"backend": "hy_shm"}'

The state is a plain state dict on one process, or an FSDP2 (DTensor)
state dict on N ranks, on that host or others: every rank calls ``push``
with what it holds and writes (or sends) its own shard, no rank gathers
the model.
Names are Hugging Face's (``model.layers.0.self_attn.q_proj.weight``);
vLLM fuses and slices them for its tensor parallelism itself.

The weights, in the engines' dtype, go into one shared-memory file in
``/dev/shm`` (the model's size, kept for the sync's life: it is the
previous version the next delta is computed against); ranks on other
hosts than rank 0's send rank 0 what changed over the group (c10d). An
engine that holds exactly the previous version reloads only the layers
whose tensors changed; any other (the first push, an engine restarted,
left out of a push, or whose update failed) gets the whole model, so a
missed update never leaves mixed weights.

The protocol (the file, the manifest, the routes, versions, failures):
docs/weight-sync.md in hy's source.

Thread-safety: one EngineSync per process and engine set; its calls are
collective over its group, made from one thread.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from . import DataLoss, FailedPrecondition, InvalidArgument, Unavailable
from . import _hy
from ._group import Group

_ALIGN = 64
_INT_OF_WIDTH = {2: "int16", 4: "int32"}


@dataclass
class EnginePush:
    """What one engine was sent by a push."""
    url: str
    mode: str  # "delta", "full", or "skipped" (not in push's engines)
    tensors: int = 0  # Tensors sent as changed (full: all; a tied one once).
    bytes: int = 0  # Their bytes in the engine's dtype.
    seconds: float = 0.0  # From the first request to the prefix cache reset.
    error: str = ""  # Why a delta fell back to full, or why it failed.


@dataclass
class PushReport:
    """A push's outcome, the same on every rank."""
    step: int
    changed_tensors: int  # Tensors whose bytes differ from the last push.
    tensors: int
    written_bytes: int  # Bytes this rank rewrote in the file (or sent).
    model_bytes: int  # The whole model in the engines' dtype.
    write_seconds: float  # This rank's compare and write.
    seconds: float  # The whole push, on this rank.
    engines: List[EnginePush] = field(default_factory=list)
    wire_bytes: int = 0  # What ranks on other hosts sent rank 0 (c10d).


_Box = Tuple[Tuple[int, ...], Tuple[int, ...]]  # (offset, shape)


@dataclass
class _Entry:
    name: str
    shape: Tuple[int, ...]
    offset: int
    nbytes: int
    alias_of: int = -1  # Index of the entry whose bytes this one shares.


# -- the file ------------------------------------------------------------


class _SharedFile:
    """The weight file on rank 0's host (docs/weight-sync.md, "The file"):
    its layout (64-byte aligned tensors, a tied tensor once), made by rank
    0 (a new locked file under /dev/shm after sweeping dead syncs' files,
    unless a path was given), mapped by the ranks on that host; the views
    of its parts, the update an engine is sent for it, and its removal."""

    def __init__(self, torch: Any, dtype_name: str, path: Optional[str]):
        self._torch = torch
        self.dtype_name = dtype_name
        self.dtype = getattr(torch, dtype_name)
        self.width = 4 if dtype_name == "float32" else 2
        self.as_int = getattr(torch, _INT_OF_WIDTH[self.width])
        self.path = path  # None until mapped, unless given.
        self.given = path is not None
        self.owner = False
        # Rank 0's lock on a file it made (flock, released by close() or by
        # the process's death), which tells _sweep_stale the file is live.
        self._lock_fd: Optional[int] = None
        self.entries: Optional[List[_Entry]] = None  # Set once agreed.
        self.size = 0
        self._buf: Any = None

    def layout(self, state: Dict[str, Any]) -> List[_Entry]:
        """`state`'s entries in the file, in order; sets the file's size."""
        entries: List[_Entry] = []
        seen: Dict[Any, int] = {}
        at = 0
        for name, t in state.items():
            if not isinstance(t, self._torch.Tensor):
                raise InvalidArgument(f"{name}: not a tensor ({type(t).__name__})")
            if not t.is_floating_point():
                raise InvalidArgument(f"{name}: {t.dtype} is not a floating "
                                      "type; engines take float weights")
            ident = _identity(t)
            e = _Entry(name, tuple(t.shape), at, _numel(t.shape) * self.width)
            if ident in seen:  # A tied weight: one copy in the file.
                first = entries[seen[ident]]
                e.offset, e.alias_of = first.offset, seen[ident]
            else:
                seen[ident] = len(entries)
                at = (at + e.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
            entries.append(e)
        self.size = at
        return entries

    def create(self) -> Tuple[str, str]:
        """Rank 0: makes the file (sized, its pages reserved); its path and
        why it could not ("" when it could)."""
        path = self.path
        if path is None:
            _sweep_stale(_SHM_DIR)
            path = os.path.join(
                _SHM_DIR, f"hystate-vllm-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            self._lock_fd = _create(path, self.size, lock=not self.given)
        except FailedPrecondition as e:
            return path, str(e)
        self.owner = not self.given
        return path, ""

    def drop(self, path: str) -> None:
        """Rank 0, when the ranks could not agree: removes a file it made."""
        if not self.given:
            _unlink(path)
            self._unlock()

    def map(self, path: str) -> None:
        """Maps the file (a rank on rank 0's host)."""
        try:
            self._buf = self._torch.from_file(path, shared=True,
                                              size=max(self.size, 1),
                                              dtype=self._torch.uint8)
        except RuntimeError as e:
            raise FailedPrecondition(f"cannot map {path}: {e}") from e
        self.path = path

    def region(self, e: _Entry, box: Optional[_Box]) -> Any:
        """The part of the file that holds `box` of entry `e` (None: all)."""
        flat = self._buf[e.offset:e.offset + e.nbytes]
        view = flat.view(self.dtype).view(e.shape)
        if box is None:
            return view
        return view[tuple(slice(o, o + n) for o, n in zip(*box))]

    def write(self, parts: Iterator[Tuple[int, Optional[_Box], Any]]
              ) -> Tuple[List[int], int]:
        """Writes the parts whose bytes differ from the file's; the indices
        of the entries it changed and the bytes it wrote."""
        changed, written = [], 0
        with self._torch.no_grad():
            for i, box, new in parts:
                if not _write_if_changed(self.region(self.entries[i], box),
                                         new, self.as_int):
                    continue
                changed.append(i)
                written += new.numel() * self.width
        return changed, written

    def update_info(self, step: int, changed: Optional[Set[int]],
                    base: Optional[str]) -> Dict[str, Any]:
        """The hy_shm update_info that loads the file as `step`: the whole
        model (changed None), or a delta against `base`."""
        manifest = []
        for i, e in enumerate(self.entries):
            owner = e.alias_of if e.alias_of >= 0 else i
            item = {"name": e.name, "dtype": self.dtype_name,
                    "shape": list(e.shape), "offset": e.offset}
            if changed is not None:
                item["changed"] = owner in changed
            manifest.append(item)
        return {"manifest_json": json.dumps(manifest), "size": self.size,
                "version": str(step), "base_version": base or "",
                "path": self.path}

    def sent(self, changed: Optional[Set[int]]) -> Tuple[int, int]:
        """The tensors and bytes an update sends as changed (a tied one
        once; None: all)."""
        sent = [e for i, e in enumerate(self.entries)
                if e.alias_of < 0 and (changed is None or i in changed)]
        return len(sent), sum(e.nbytes for e in sent)

    def close(self) -> None:
        """Unmaps the file and removes it if this process made it."""
        self._buf = None
        if self.owner and self.path is not None:
            _unlink(self.path)
        self._unlock()
        self.owner = False

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _write_if_changed(region: Any, new: Any, as_int: Any) -> bool:
    """Copies `new` into `region` unless their bytes are equal; whether it
    did."""
    import torch
    if torch.equal(region.view(as_int), new.view(as_int)):
        return False
    region.copy_(new)
    return True


# -- ranks on other hosts ------------------------------------------------


@dataclass
class _Outgoing:
    """What a remote rank sends rank 0 at a push, in order."""
    meta: List[Any] = field(default_factory=list)  # (entry, kind, count)
    pieces: List[Any] = field(default_factory=list)  # Tensors to send.
    updates: List[Any] = field(default_factory=list)  # (entry, gaps, vals)
    scanned: int = 0  # Bytes compared with the base.
    coded: int = 0  # Values sent as gaps, and the seconds coding them.
    code_s: float = 0.0


@dataclass
class _Incoming:
    """What rank 0 received from the remote ranks at a push."""
    changed: Set[int] = field(default_factory=set)
    wire: int = 0
    err: str = ""
    decoded: int = 0
    decode_s: float = 0.0


class _RemoteParts:
    """The c10d transport of the parts that ranks on other hosts than rank
    0's write (docs/weight-sync.md, "Ranks on other hosts"). Such a rank
    keeps its base (the values the file holds for its parts) and sends
    rank 0 each changed part whole, or as its changed values each after
    the 16-bit distance from the one before (found and coded in one pass
    over the part and its base, in C++ without the GIL): gaps while they
    take less time than the whole part, counting each changed value's
    bytes and the CPU time its coding, decoding and writing took last
    time (at the link's learned speed). Where the last push showed that
    sending a byte takes less time than comparing it (a fast link), it
    sends its parts whole and keeps no base, and rank 0 skips the ones
    that did not change. Rank 0 receives into the file."""

    def __init__(self, torch: Any, group: Group, file: _SharedFile,
                 delta: bool):
        self._torch = torch
        self.group = group
        self.file = file
        self.delta = delta
        self.width = file.width
        self.remotes: List[int] = []  # Ranks on other hosts.
        # The parts each rank writes: entry index -> box (offset, shape),
        # None for the whole of a plain tensor.
        self.boxes: List[Dict[int, Optional[_Box]]] = []
        self.prev: Dict[int, Any] = {}  # This rank's base, by entry.
        # Bytes a second this rank compared, and sent to rank 0, last time.
        self.scan_bps: Optional[float] = None
        self.wire_bps: Optional[float] = None
        # Seconds a changed value sent as a gap costs beyond its bytes: this
        # rank's coding and rank 0's decoding and writing, last time.
        self.code_s: Optional[float] = None
        self.apply_s: Optional[float] = None  # Its base's update, here.
        self.decode_s: Optional[float] = None

    def collect(self, parts: Iterator[Tuple[int, Optional[_Box], Any]]
                ) -> _Outgoing:
        """A remote rank's changed parts. kind "full" sends the part's
        count values; "gaps" sends count 16-bit gaps between flat indices
        into the part (_hy.gap_code), then the count values at those
        indices."""
        out = _Outgoing()
        scan = self._scan_pays()
        if not scan:
            self.prev.clear()  # Not kept where it would not be used.
        t0 = time.perf_counter()
        per_value = self._gap_cost()
        with self._torch.no_grad():
            for i, _, new in parts:
                self._collect_part(out, i, new.contiguous(), scan, per_value)
        if out.scanned:
            self.scan_bps = out.scanned / max(time.perf_counter() - t0, 1e-6)
        if out.coded >= 1 << 16:  # Enough to time the coding by.
            self.code_s = out.code_s / out.coded
        return out

    def _gap_cost(self) -> float:
        """A changed value's CPU time (coding it, decoding and writing it at
        rank 0, updating the base with it), in bytes at the link's learned
        speed; 0 until known."""
        if not self.wire_bps or self.code_s is None:
            return 0.0
        return (self.code_s + (self.apply_s or 0.0) +
                (self.decode_s or 0.0)) * self.wire_bps

    def _collect_part(self, out: _Outgoing, i: int, new: Any, scan: bool,
                      per_value: float) -> None:
        prev = self.prev.get(i) if scan else None
        if prev is not None:
            out.scanned += new.numel() * self.width
            nv, pv = new.view(self.file.as_int), prev.view(self.file.as_int)
            if self._torch.equal(nv, pv):
                return
            # Gaps while each changed value's 2 + width bytes and CPU time
            # cost less than the whole part's width bytes a value.
            most = int(new.numel() * self.width
                       // (2 + self.width + per_value))
            if self._collect_gaps(out, i, nv.view(-1), pv.view(-1), most):
                return
        out.meta.append((i, "full", new.numel()))
        out.pieces.append(new.view(-1))
        if scan:
            out.updates.append((i, None, new))

    def _collect_gaps(self, out: _Outgoing, i: int, nv: Any, pv: Any,
                      most: int) -> bool:
        """Adds part i as gaps when at most `most` values changed; whether
        it did."""
        tc = time.perf_counter()
        if _sample_says_more(nv, pv, most):
            return False
        coded = _hy.gap_code(nv.numpy(), pv.numpy(), most)
        if coded is None:
            return False
        gaps, vals = (self._torch.from_numpy(a) for a in coded)
        out.meta.append((i, "gaps", gaps.numel()))
        out.pieces += [gaps, vals]
        out.updates.append((i, gaps, vals))
        out.coded += gaps.numel()
        out.code_s += time.perf_counter() - tc
        return True

    def _scan_pays(self) -> bool:
        """Whether to compare with the base (and keep one): with deltas on,
        unless the last push showed that sending a byte to rank 0 takes
        less time than comparing it (a fast link: a full send is then
        quicker than finding what changed)."""
        if not self.delta:
            return False
        if self.scan_bps is None or self.wire_bps is None:
            return True
        return self.wire_bps < self.scan_bps

    def send(self, pieces: List[Any]) -> int:
        """Sends `pieces` to rank 0, in order; their bytes. Learns the
        link's speed from a send big enough to time."""
        ts = time.perf_counter()
        for p in pieces:
            self.group.send(p, 0)
        sent = sum(p.numel() * p.element_size() for p in pieces)
        if sent >= 1 << 20:
            self.wire_bps = sent / max(time.perf_counter() - ts, 1e-6)
        return sent

    def receive(self, meta_by_rank: Dict[int, list]
                ) -> Tuple[Set[int], int, str, Optional[float]]:
        """Rank 0: receives each remote rank's changed parts into the file;
        the entries changed, the bytes received, what was wrong with them
        ("" if nothing), and the seconds a value sent as a gap took to
        decode and write (None: too few to tell). Everything sent is
        received, even after an error, so no sender is left waiting."""
        got = _Incoming()
        for r in sorted(meta_by_rank):
            for i, kind, n in meta_by_rank[r]:
                self._receive_part(got, r, i, kind == "full", n)
        return (got.changed, got.wire, got.err,
                got.decode_s / got.decoded if got.decoded >= 1 << 16
                else None)

    def _receive_part(self, got: _Incoming, r: int, i: int, whole: bool,
                      n: int) -> None:
        e = self.file.entries[i]
        region = self.file.region(e, self.boxes[r].get(i, None))
        bad = "" if i in self.boxes[r] else "a part it does not own"
        if not bad and (n != region.numel() if whole
                        else not 0 < n <= region.numel()):
            bad = f"{n} values for a part of {region.numel()}"
        gaps, into = self._recv(r, n, whole)
        got.wire += n * self.width + (2 * n if gaps is not None else 0)
        td = time.perf_counter()
        try:
            if bad:
                raise InvalidArgument(bad)
            if whole:
                # A part sent whole (the sender did not compare) that did
                # not change reloads nothing.
                if not _write_if_changed(region, into.view(region.shape),
                                         self.file.as_int):
                    return
            else:
                self._apply_gaps(region, gaps, into)
                got.decoded += n
                got.decode_s += time.perf_counter() - td
        except (InvalidArgument, RuntimeError, IndexError) as x:
            got.err = got.err or f"rank {r}'s {e.name}: {x}"
        got.changed.add(i)

    def _recv(self, r: int, n: int, whole: bool) -> Tuple[Any, Any]:
        """Rank r's next part: (None, n values) or (n gaps, n values as
        integers)."""
        torch = self._torch
        into = torch.empty(n, dtype=self.file.dtype if whole
                           else self.file.as_int)
        gaps = None if whole else torch.empty(n, dtype=torch.int16)
        if gaps is not None:
            self.group.recv(gaps, r)
        self.group.recv(into.view(-1), r)
        return gaps, into

    def _apply_gaps(self, region: Any, gaps: Any, vals: Any) -> None:
        box = region.contiguous()
        # InvalidArgument for an index past the part.
        _hy.gap_apply(box.view(self.file.as_int).view(-1).numpy(),
                      gaps.numpy(), vals.numpy())
        if box is not region:
            region.copy_(box)

    def commit(self, updates: List[Any]) -> None:
        """Rank 0 has written what this rank sent: its base follows."""
        applied, apply_s = 0, 0.0
        for i, gaps, vals in updates:
            if gaps is not None:
                t0 = time.perf_counter()
                _hy.gap_apply(
                    self.prev[i].view(self.file.as_int).view(-1).numpy(),
                    gaps.numpy(), vals.numpy())
                apply_s += time.perf_counter() - t0
                applied += gaps.numel()
            elif i in self.prev:
                self.prev[i].copy_(vals)
            else:
                self.prev[i] = vals.clone()
        if applied >= 1 << 16:
            self.apply_s = apply_s / applied


# -- the engines ---------------------------------------------------------


class _Engine:
    """One engine's routes, over HTTP with the run's key
    (docs/weight-sync.md, "Routes"), and the step this sync last brought
    it to. An update is a delta when the engine holds exactly its base,
    else (or when the engine refuses the delta) the whole model."""

    def __init__(self, url: str, key: str, timeout: float):
        self.url = url
        self.key = key
        self.timeout = timeout
        self.step: Optional[int] = None  # None: not known to be any step.

    def post(self, route: str, body: Any) -> Any:
        """POSTs `body` as JSON (GET when None); the JSON answer.
        Unavailable for an HTTP error or no answer."""
        req = urllib.request.Request(
            self.url + route, method="POST" if body is not None else "GET",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json",
                     **({"Authorization": "Bearer " + self.key}
                        if self.key else {})})
        where = self.url + route
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                text = r.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            raise Unavailable(f"{where}: HTTP {e.code}: {detail}") from e
        except (OSError, urllib.error.URLError) as e:
            raise Unavailable(f"{where}: {e}") from e
        return json.loads(text) if text else None

    def update(self, file: _SharedFile, step: int, changed: Set[int],
               prev: Optional[int], delta: bool) -> EnginePush:
        """Loads the file as `step`: a delta against `prev` (the step the
        file held before this push) when the engine holds exactly that,
        else the whole model."""
        t0 = time.perf_counter()
        base, why = self._base(prev) if delta else (None, "")
        self.step = None
        if base is not None:
            try:
                push = self._load(file, step, changed, base)
                push.seconds = time.perf_counter() - t0
                return push
            except Unavailable as e:  # Refused (say, restarted): whole.
                why = str(e)
        push = self._load(file, step, None, None)
        push.error, push.seconds = why, time.perf_counter() - t0
        return push

    def _base(self, prev: Optional[int]) -> Tuple[Optional[str], str]:
        """The version a delta may be taken against (None: none) and why
        not."""
        if prev is None or self.step != prev:
            return None, ""
        holds = (self.post("/weight_info", None) or {}).get("weight_version")
        if holds == str(prev):
            return str(prev), ""
        return None, f"engine holds {holds!r}, not {prev}"

    def _load(self, file: _SharedFile, step: int,
              changed: Optional[Set[int]], base: Optional[str]
              ) -> EnginePush:
        info = file.update_info(step, changed, base)
        self.post("/start_weight_update", {})
        try:
            self.post("/update_weights", {"update_info": info})
        except Unavailable:
            try:  # vLLM has ended the session already; nothing to finish.
                self.post("/finish_weight_update", {"weight_version": ""})
            except Unavailable:
                pass
            raise
        self.post("/finish_weight_update", {"weight_version": str(step)})
        self.post("/reset_prefix_cache", {})
        self.step = step
        tensors, nbytes = file.sent(changed)
        return EnginePush(self.url, "delta" if base else "full", tensors,
                          nbytes)


# -- the sync ------------------------------------------------------------


class EngineSync:
    """Keeps engines at the pushed versions of a model (see the module).

    engines: the engines' base URLs (``http://host:port``).
    api_key: the engines' key (default: $HY_VLLM_API_KEY).
    dtype: the engines' dtype, "bfloat16" or "float32".
    delta: False sends every tensor every time.
    path: the shared-memory file (default: a new one under /dev/shm,
      removed by close()).
    group: a torch.distributed process group (default: the world when
      initialized, else this process alone).
    timeout: seconds to wait for an engine's answer.
    """

    def __init__(self, engines: Sequence[str], api_key: Optional[str] = None,
                 dtype: str = "bfloat16", delta: bool = True,
                 path: Optional[str] = None, group: Any = None,
                 timeout: float = 600.0):
        import torch
        if dtype not in ("bfloat16", "float32"):
            raise InvalidArgument(f"dtype {dtype!r}: bfloat16 or float32")
        if not engines:
            raise InvalidArgument("EngineSync needs at least one engine URL")
        self._torch = torch
        self.urls = [u.rstrip("/") for u in engines]
        self.key = api_key if api_key is not None else os.environ.get(
            "HY_VLLM_API_KEY", "")
        self.dtype_name = dtype
        self.dtype = getattr(torch, dtype)
        self.width = 4 if dtype == "float32" else 2
        self.delta = delta
        self.timeout = timeout
        self.group = Group(group)
        self._file = _SharedFile(torch, dtype, path)
        self._net = _RemoteParts(torch, self.group, self._file, delta)
        self._engines = {u: _Engine(u, self.key, timeout) for u in self.urls}
        # The step whose bytes the file holds entirely; None: no such step.
        self._file_step: Optional[int] = None
        # The parts this rank writes (see _RemoteParts.boxes), and whether
        # it runs on another host than rank 0's.
        self._mine: Dict[int, Optional[_Box]] = {}
        self._remote = False

    # -- the API ------------------------------------------------------

    def push(self, state: Any, step: int,
             engines: Optional[Sequence[str]] = None) -> PushReport:
        """Brings the engines to `state` as `step` (collective: every rank
        of the group calls it with its part of the same model).

        state: a state dict of tensors or DTensors (an nn.Module: its
          state_dict()); the same names and shapes at every push.
        engines: the URLs to update this time (default: all); one left out
          holds its version and gets the whole model at its next push.
        Raises InvalidArgument for a state that does not fit, Unavailable
        naming the engine that did not take the update (the others did:
        the report of a push that raised is lost, not the push).
        """
        t0 = time.perf_counter()
        targets = self._targets(engines)
        state = self._state_dict(state)
        prev_file, self._file_step = self._file_step, None  # Until written.
        tw = time.perf_counter()
        written, changed, wire, bad, decode_s, updates = \
            self._write_step(state)
        write_s = time.perf_counter() - tw
        pushes = []
        if self.group.rank == 0 and not bad:
            pushes = self._update_engines(targets, step, changed, prev_file)
        pushes, wire, bad, changed, decode_s = self.group.all_gather(
            (pushes, wire, bad, changed, decode_s))[0]
        self._settle(bad, decode_s, updates)
        self._file_step = step
        first_error = next((p.error for p in pushes if p.mode == "failed"), "")
        if first_error:
            raise Unavailable(first_error)
        return PushReport(
            step=step, changed_tensors=len(changed),
            tensors=sum(1 for e in self._file.entries if e.alias_of < 0),
            written_bytes=written, model_bytes=self._file.size,
            write_seconds=write_s, seconds=time.perf_counter() - t0,
            engines=pushes, wire_bytes=wire)

    def close(self) -> None:
        """Unmaps the file and removes it if this sync made it."""
        self._file.close()

    def __enter__(self) -> "EngineSync":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- a push's steps -----------------------------------------------

    def _state_dict(self, state: Any) -> Dict[str, Any]:
        """`state` as a dict; the file opened at the first push, checked
        against it after."""
        if hasattr(state, "state_dict") and callable(state.state_dict):
            state = state.state_dict()
        state = dict(state)
        if self._file.entries is None:
            self._open(state)
        elif [e.name for e in self._file.entries] != list(state):
            raise InvalidArgument("the state dict's names differ from the "
                                  "first push's: make a new EngineSync")
        return state

    def _targets(self, engines: Optional[Sequence[str]]) -> List[str]:
        """The URLs a push updates; InvalidArgument for one not this
        sync's."""
        targets = [u.rstrip("/") for u in (engines if engines is not None
                                           else self.urls)]
        unknown = [u for u in targets if u not in self._engines]
        if unknown:
            raise InvalidArgument(f"not this sync's engines: {unknown}")
        return targets

    def _open(self, state: Dict[str, Any]) -> None:
        """The first push (collective): the ranks agree on the file's
        layout and on which rank writes which part; rank 0 makes the file,
        the ranks on its host map it."""
        entries = self._file.layout(state)
        path, got = self._agree(state, entries)
        hosts = [g[0] for g in got]
        self._net.remotes = [r for r, h in enumerate(hosts) if h != hosts[0]]
        self._remote = self.group.rank in self._net.remotes
        try:
            self._net.boxes = _owners(entries, [g[4] for g in got],
                                      [h == hosts[0] for h in hosts])
        except InvalidArgument:
            self._drop_owned(path)
            raise
        self._mine = self._net.boxes[self.group.rank]
        self._file.entries = entries
        if not self._remote:  # The file is on rank 0's host.
            self._file.map(path)

    def _agree(self, state: Dict[str, Any], entries: List[_Entry]
               ) -> Tuple[str, List[Any]]:
        """Rank 0 makes the file; every rank's (host, path, signature,
        error, boxes), after checking that none failed and all agree.
        Returns rank 0's path and that list."""
        signature = [(e.name, e.shape, e.alias_of) for e in entries]
        path, err = self._file.path, ""
        if self.group.rank == 0:
            path, err = self._file.create()
        try:
            boxes, box_err = _boxes(state, entries), ""
        except InvalidArgument as e:
            boxes, box_err = [], str(e)
        got = self.group.all_gather((socket.gethostname(), path, signature,
                                     err or box_err, boxes))
        path = got[0][1]
        try:
            _check_agreed(got, signature, bool(err))
        except (FailedPrecondition, InvalidArgument):
            self._drop_owned(path)
            raise
        return path, got

    def _drop_owned(self, path: str) -> None:
        if self.group.rank == 0:
            self._file.drop(path)

    def _parts(self, state: Dict[str, Any]
               ) -> Iterator[Tuple[int, Optional[_Box], Any]]:
        """This rank's parts of `state`: (entry index, box, values in the
        engines' dtype), after checking every tensor's shape."""
        for e, t in zip(self._file.entries, state.values()):
            if tuple(t.shape) != e.shape:
                raise InvalidArgument(
                    f"{e.name}: shape {tuple(t.shape)}, the first push's "
                    f"was {e.shape}: make a new EngineSync")
        values = list(state.values())
        dtensor = _dtensor_class()
        for i, box in self._mine.items():
            t = values[i]
            if dtensor is not None and isinstance(t, dtensor):
                t = t.to_local()
            yield i, box, t.detach().to(device="cpu", dtype=self.dtype)

    def _write_step(self, state: Dict[str, Any]) -> Tuple[
            int, Set[int], int, str, Optional[float], List[Any]]:
        """Every rank's part of `state` into the file (collective): a rank
        on the engines' host writes its own, a remote rank sends what
        changed to rank 0, which writes it. Returns this rank's bytes, the
        entries that changed (complete on rank 0), the wire bytes, rank
        0's error writing what remote ranks sent ("" if none), its decode
        time and the updates to commit once the engines hold the step.
        Raises InvalidArgument, on every rank, when a rank could not
        write."""
        changed, written, err, out = self._write_mine(state)
        got = self.group.all_gather((changed, err, out.meta))
        for rank, (_, e, _) in enumerate(got):
            if e:
                raise InvalidArgument(f"rank {rank} could not write: {e}")
        all_changed: Set[int] = set()
        for r, (c, _, _) in enumerate(got):
            if r not in self._net.remotes:
                all_changed.update(c)
        wire, bad, decode_s = 0, "", None
        if self.group.rank == 0 and self._net.remotes:
            c, wire, bad, decode_s = self._net.receive(
                {r: got[r][2] for r in self._net.remotes})
            all_changed |= c
        # To rank 0, in the order of out.meta. What a remote rank wrote is
        # what it sent.
        written += self._net.send(out.pieces)
        return written, all_changed, wire, bad, decode_s, out.updates

    def _write_mine(self, state: Dict[str, Any]
                    ) -> Tuple[List[int], int, str, _Outgoing]:
        """This rank's parts: written into the file, or (a remote rank)
        collected to send. The entries changed, the bytes written, the
        error ("" if none) and what to send."""
        out = _Outgoing()
        try:
            if self._remote:
                out = self._net.collect(self._parts(state))
                return [m[0] for m in out.meta], 0, "", out
            changed, written = self._file.write(self._parts(state))
            return changed, written, "", out
        except Exception as e:  # noqa: BLE001 (every rank must hear of it)
            return [], 0, f"{type(e).__name__}: {e}", _Outgoing()

    def _update_engines(self, targets: List[str], step: int,
                        changed: Set[int],
                        prev_file: Optional[int]) -> List[EnginePush]:
        """Rank 0: each target engine loads the file as `step` (an engine
        left out keeps its step; see _Engine.update); one that fails is
        reported, not raised."""
        pushes = []
        for url in self.urls:
            if url not in targets:
                pushes.append(EnginePush(url, "skipped"))
                continue
            try:
                pushes.append(self._engines[url].update(
                    self._file, step, changed, prev_file, self.delta))
            except Unavailable as e:
                pushes.append(EnginePush(url, "failed", error=str(e)))
        return pushes

    def _settle(self, bad: str, decode_s: Optional[float],
                updates: List[Any]) -> None:
        """After the engines' update (every rank): the remote ranks' bases
        follow rank 0's writes, or (rank 0 could not write what they sent)
        are dropped: DataLoss, the next push is whole."""
        if decode_s is not None:
            self._net.decode_s = decode_s
        if bad:  # The file holds part of this step: no engine took it.
            self._net.prev.clear()
            raise DataLoss("rank 0 could not write what a rank on another "
                           f"host sent: {bad}; the next push is whole")
        self._net.commit(updates)


def _check_agreed(got: List[Any], signature: List[Any],
                  made_err: bool) -> None:
    """Raises the first rank's error (FailedPrecondition for rank 0's
    file), else InvalidArgument for the first rank whose names or shapes
    differ from rank 0's."""
    for rank, (_, _, _, e, _) in enumerate(got):
        if e:
            raise (FailedPrecondition if rank == 0 and made_err
                   else InvalidArgument)(
                e if rank == 0 else f"rank {rank}: {e}")
    for rank, (_, _, sig, _, _) in enumerate(got):
        if sig != signature:
            raise InvalidArgument(
                f"rank {rank}'s state dict has other names or shapes "
                "than rank 0's")


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _identity(t: Any) -> Any:
    dtensor = _dtensor_class()
    if dtensor is not None and isinstance(t, dtensor):
        t = t.to_local()
    if t.numel() == 0:
        return ("empty", id(t))
    return (t.untyped_storage().data_ptr(), t.storage_offset(),
            tuple(t.shape), tuple(t.stride()))


def _sample_says_more(new: Any, old: Any, most: int) -> bool:
    """Whether every k-th value of 1-d integer views `new` and `old` (65536
    of them, one a cache line) says that more than `most` differ, by a
    quarter: then the part goes whole without a scan that would stop past
    `most` anyway. Only a shortcut: a sample that misses changes costs the
    scan."""
    import torch
    n = new.numel()
    if n < 1 << 20:
        return False
    k = n // (1 << 16) | 1  # Odd: no aliasing with power-of-2 rows.
    hits = int(torch.ne(new[::k], old[::k]).sum())
    return hits * k > most * 5 // 4


def _boxes(state: Dict[str, Any], entries: List[_Entry]) -> List[Any]:
    """What this rank holds of each entry: "plain" (a whole tensor), None
    (an alias, or nothing), or its box (offset, shape) in the tensor."""
    dtensor = _dtensor_class()
    out: List[Any] = []
    for e, t in zip(entries, state.values()):
        if e.alias_of >= 0:
            out.append(None)
        elif dtensor is None or not isinstance(t, dtensor):
            out.append("plain")
        elif any(p.is_partial() for p in t.placements):
            raise InvalidArgument(f"{e.name}: a partial DTensor (pending a "
                                  "reduction) holds no values to send")
        elif t.to_local().numel() == 0:
            out.append(None)
        else:
            from torch.distributed.tensor._utils import (
                compute_local_shape_and_global_offset)
            shape, offset = compute_local_shape_and_global_offset(
                t.shape, t.device_mesh, t.placements)
            out.append((tuple(offset), tuple(shape)))
    return out


def _owners(entries: List[_Entry], boxes: List[List[Any]],
            local: List[bool]) -> List[Dict[int, Optional[_Box]]]:
    """Which rank writes which part: rank 0 a plain tensor; each distinct
    box of a DTensor its lowest rank on rank 0's host, else its lowest
    rank. Raises InvalidArgument where the parts do not make the tensor."""
    owners: List[Dict[int, Optional[_Box]]] = [{} for _ in boxes]
    for i, e in enumerate(entries):
        if e.alias_of >= 0:
            continue
        held = [b[i] for b in boxes]
        if any(h == "plain" for h in held):
            if any(h not in ("plain", None) for h in held):
                raise InvalidArgument(f"{e.name}: a DTensor on some ranks, "
                                      "a plain tensor on others")
            owners[0][i] = None
            continue
        by_box: Dict[Any, List[int]] = {}
        for r, h in enumerate(held):
            if h is not None:
                by_box.setdefault(h, []).append(r)
        total = 0
        for box, ranks in by_box.items():
            near = [r for r in ranks if local[r]]
            owners[min(near or ranks)][i] = box
            n = 1
            for d in box[1]:
                n *= d
            total += n
        want = 1
        for d in e.shape:
            want *= d
        if total != want:
            raise InvalidArgument(
                f"{e.name}: the ranks' parts hold {total} of its {want} "
                "values (overlapping or missing shards)")
    return owners


def _dtensor_class():
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return None
    return DTensor


_SHM_DIR = "/dev/shm"
# The files EngineSync makes there: its process id and 8 random hex digits.
_SHM_NAME = re.compile(r"hystate-vllm-(\d+)-[0-9a-f]{8}")


def _create(path: str, size: int, lock: bool = False) -> Optional[int]:
    """Makes the file of `size` bytes at `path`. With `lock`, it is made
    under a hidden name, locked (flock) and only then renamed to `path`;
    returns the descriptor that holds the lock (until closed, or the
    process dies), so _sweep_stale never takes a live sync's file."""
    where = path
    if lock:
        where = os.path.join(os.path.dirname(path),
                             "." + os.path.basename(path) + ".new")
    try:
        fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as e:
        raise FailedPrecondition(f"cannot create {path}: {e}") from e
    try:
        if lock:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # Reserve the pages now: a full /dev/shm is this error, not a
        # SIGBUS on a later write.
        os.posix_fallocate(fd, 0, max(size, 1))
        if lock:
            os.rename(where, path)
    except OSError as e:
        os.close(fd)
        _unlink(where)
        raise FailedPrecondition(
            f"cannot reserve {size} bytes for {path}: {e}") from e
    if lock:
        return fd
    os.close(fd)
    return None


def _sweep_stale(directory: str) -> List[str]:
    """Removes the files that EngineSyncs killed before close() left in
    `directory` (each as big as a model): named as _open names them, their
    process gone from this host and their lock free (a file a sync in
    another pid namespace holds stays). Returns the paths removed."""
    removed: List[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = _SHM_NAME.fullmatch(name)
        if m is None or _alive(int(m.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass  # Locked: its sync lives. Or gone already.
        finally:
            os.close(fd)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
