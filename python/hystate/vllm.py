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

How: the weights, in the engines' dtype, go into one shared-memory file
(``/dev/shm``; it costs the model's size in the engines' dtype, kept for the
sync's life: it is the previous version the next delta is computed
against). Each rank compares its values with the file's bit for bit and
rewrites what changed. Rank 0 then tells each engine, over vLLM's
weight-transfer routes, which tensors changed since the version it holds;
the engine maps the file (no copy) and reloads only the layers those
tensors feed. An engine is sent the delta only if it holds exactly the
previous version: it reports its version (``/weight_info``) and its hy_shm
backend refuses a delta against any other. Otherwise (the first push, an
engine restarted, an engine left out of a push or whose update failed) it
is sent the whole model, so a missed update can never leave mixed weights.

Ranks on other hosts than rank 0's (rank 0 runs beside the engines) cannot
reach the file: they send rank 0 what changed over the group (c10d), and
rank 0 writes it. Each keeps its share of the model in the engines' dtype
(the values the file holds for it) to compare against; a tensor of which
few values changed crosses the wire as its changed values, each after the
16-bit distance from the one before (2 bytes of index a value, where
int32 indices took 4; found and coded in one pass over the part and its
base, in C++ without the GIL), one that changed more as a whole: gaps
while they take less time than the whole part, counting each changed
value's bytes and the CPU time its coding, decoding and writing took last
time (at the link's learned speed). Where the last push showed that
sending a byte takes less time than comparing it (a fast link), such a
rank sends its parts whole and keeps no copy, and rank 0 skips the ones
that did not change.
Every part of the model is written by one rank: a replicated one by a
rank on rank 0's host when one holds it.

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
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

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
        self._path = path
        self._owner = False
        # Rank 0's lock on a file it made (flock, released by close() or by
        # the process's death), which tells _sweep_stale the file is live.
        self._lock_fd: Optional[int] = None
        self._entries: Optional[List[_Entry]] = None
        self._buf = None
        self._size = 0
        # The step whose bytes the file holds entirely; None: no such step.
        self._file_step: Optional[int] = None
        # The step each engine was last brought to by this sync (rank 0).
        self._engine_step: Dict[str, Optional[int]] = {u: None for u in self.urls}
        # The parts this rank writes: entry index -> box (offset, shape),
        # None for the whole of a plain tensor.
        self._mine: Dict[int, Optional[_Box]] = {}
        # On another host than rank 0: the values the file holds for this
        # rank's parts (absent until rank 0 has written them).
        self._remote = False
        self._prev: Dict[int, Any] = {}
        # Bytes a second this rank compared, and sent to rank 0, last time.
        self._scan_bps: Optional[float] = None
        self._wire_bps: Optional[float] = None
        # Seconds a changed value sent as a gap costs beyond its bytes: this
        # rank's coding and rank 0's decoding and writing, last time.
        self._code_s: Optional[float] = None
        self._apply_s: Optional[float] = None  # Its base's update, here.
        self._decode_s: Optional[float] = None
        # Ranks on other hosts, and the parts each rank writes.
        self._remotes: List[int] = []
        self._all_boxes: List[Dict[int, Optional[_Box]]] = []

    # -- the file -----------------------------------------------------

    def _layout(self, state: Dict[str, Any]) -> List[_Entry]:
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
            n = 1
            for d in t.shape:
                n *= d
            e = _Entry(name, tuple(t.shape), at, n * self.width)
            if ident in seen:  # A tied weight: one copy in the file.
                first = entries[seen[ident]]
                e.offset, e.alias_of = first.offset, seen[ident]
            else:
                seen[ident] = len(entries)
                at = (at + e.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
            entries.append(e)
        self._size = at
        return entries

    def _open(self, state: Dict[str, Any]) -> None:
        entries = self._layout(state)
        signature = [(e.name, e.shape, e.alias_of) for e in entries]
        path = self._path
        if self.group.rank == 0 and path is None:
            _sweep_stale(_SHM_DIR)
            path = os.path.join(
                _SHM_DIR, f"hystate-vllm-{os.getpid()}-{os.urandom(4).hex()}")
        err = ""
        if self.group.rank == 0:
            try:
                self._lock_fd = _create(path, self._size,
                                        lock=self._path is None)
                self._owner = self._path is None
            except FailedPrecondition as e:
                err = str(e)
        try:
            boxes, box_err = _boxes(state, entries), ""
        except InvalidArgument as e:
            boxes, box_err = [], str(e)
        got = self.group.all_gather((socket.gethostname(), path, signature,
                                     err or box_err, boxes))
        path = got[0][1]
        for rank, (_, _, _, e, _) in enumerate(got):
            if e:
                self._drop_owned(path)
                raise (FailedPrecondition if rank == 0 and err
                       else InvalidArgument)(
                    e if rank == 0 else f"rank {rank}: {e}")
        for rank, (_, _, sig, _, _) in enumerate(got):
            if sig != signature:
                self._drop_owned(path)
                raise InvalidArgument(
                    f"rank {rank}'s state dict has other names or shapes "
                    "than rank 0's")
        hosts = [g[0] for g in got]
        self._remotes = [r for r, h in enumerate(hosts) if h != hosts[0]]
        self._remote = self.group.rank in self._remotes
        try:
            self._all_boxes = _owners(entries, [g[4] for g in got],
                                      [h == hosts[0] for h in hosts])
        except InvalidArgument:
            self._drop_owned(path)
            raise
        self._mine = self._all_boxes[self.group.rank]
        self._entries = entries
        if self._remote:  # The file is on rank 0's host, not this one.
            return
        try:
            self._buf = self._torch.from_file(path, shared=True,
                                              size=max(self._size, 1),
                                              dtype=self._torch.uint8)
        except RuntimeError as e:
            raise FailedPrecondition(f"cannot map {path}: {e}") from e
        self._path = path

    def _drop_owned(self, path: str) -> None:
        if self.group.rank == 0 and self._path is None:
            _unlink(path)
            self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _view(self, e: _Entry):
        flat = self._buf[e.offset:e.offset + e.nbytes]
        return flat.view(self.dtype).view(e.shape)

    def _parts(self, state: Dict[str, Any]):
        """This rank's parts of `state`: (entry index, box, values in the
        engines' dtype), after checking every tensor's shape."""
        for e, t in zip(self._entries, state.values()):
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

    def _write(self, state: Dict[str, Any]) -> Tuple[List[int], int]:
        """Writes this rank's parts of `state` into the file; the indices
        of the entries it changed and the bytes it wrote."""
        torch = self._torch
        changed, written = [], 0
        as_int = getattr(torch, _INT_OF_WIDTH[self.width])
        with torch.no_grad():
            for i, box, new in self._parts(state):
                region = self._region(self._entries[i], box)
                if torch.equal(region.view(as_int), new.view(as_int)):
                    continue
                region.copy_(new)
                changed.append(i)
                written += new.numel() * self.width
        return changed, written

    def _region(self, e: _Entry, box: Optional[_Box]):
        """The part of the file that holds `box` of entry `e`."""
        view = self._view(e)
        if box is None:
            return view
        return view[tuple(slice(o, o + n) for o, n in zip(*box))]

    # -- ranks on other hosts -----------------------------------------

    def _collect(self, state: Dict[str, Any]):
        """A remote rank's changed parts: ([(entry, kind, count)], the
        tensors to send, and how to bring its base to them once rank 0 has
        them). kind "full" sends the part's count values; "gaps" sends
        count 16-bit gaps between flat indices into the part (_hy.gap_code:
        one pass over the part and its base), then the count values at
        those indices."""
        torch = self._torch
        as_int = getattr(torch, _INT_OF_WIDTH[self.width])
        meta, pieces, updates = [], [], []
        scan = self._scan_pays()
        if not scan:
            self._prev.clear()  # Not kept where it would not be used.
        t0, scanned = time.perf_counter(), 0
        coded, code_s = 0, 0.0
        # A part goes as gaps while that takes less time than sending it
        # whole: each changed value costs its 2 + width bytes on the wire
        # plus the CPU time to code it, decode and write it at rank 0 and
        # update the base with it (learned, in bytes at the link's learned
        # speed; 0 until known), a whole part width bytes a value.
        per_value = 0.0
        if self._wire_bps and self._code_s is not None:
            per_value = (self._code_s + (self._apply_s or 0.0) +
                         (self._decode_s or 0.0)) * self._wire_bps
        with torch.no_grad():
            for i, _, new in self._parts(state):
                new = new.contiguous()
                prev = self._prev.get(i) if scan else None
                if prev is not None:
                    scanned += new.numel() * self.width
                    nv, pv = new.view(as_int), prev.view(as_int)
                    if torch.equal(nv, pv):
                        continue
                    most = int(new.numel() * self.width
                               // (2 + self.width + per_value))
                    coded_part = None
                    tc = time.perf_counter()
                    if not _sample_says_more(nv.view(-1), pv.view(-1), most):
                        coded_part = _hy.gap_code(nv.view(-1).numpy(),
                                                  pv.view(-1).numpy(), most)
                    if coded_part is not None:
                        gaps, vals = (torch.from_numpy(a) for a in coded_part)
                        meta.append((i, "gaps", gaps.numel()))
                        pieces += [gaps, vals]
                        updates.append((i, gaps, vals))
                        coded += gaps.numel()
                        code_s += time.perf_counter() - tc
                        continue
                meta.append((i, "full", new.numel()))
                pieces.append(new.view(-1))
                if scan:
                    updates.append((i, None, new))
        if scanned:
            self._scan_bps = scanned / max(time.perf_counter() - t0, 1e-6)
        if coded >= 1 << 16:  # Enough to time the coding by.
            self._code_s = code_s / coded
        return meta, pieces, updates

    def _scan_pays(self) -> bool:
        """Whether to compare with the base (and keep one): with deltas on,
        unless the last push showed that sending a byte to rank 0 takes
        less time than comparing it (a fast link: a full send is then
        quicker than finding what changed)."""
        if not self.delta:
            return False
        if self._scan_bps is None or self._wire_bps is None:
            return True
        return self._wire_bps < self._scan_bps

    def _commit(self, updates) -> None:
        """Rank 0 has written what this rank sent: its base follows."""
        applied, apply_s = 0, 0.0
        as_int = getattr(self._torch, _INT_OF_WIDTH[self.width])
        for i, gaps, vals in updates:
            if gaps is not None:
                t0 = time.perf_counter()
                _hy.gap_apply(self._prev[i].view(as_int).view(-1).numpy(),
                              gaps.numpy(), vals.numpy())
                apply_s += time.perf_counter() - t0
                applied += gaps.numel()
            elif i in self._prev:
                self._prev[i].copy_(vals)
            else:
                self._prev[i] = vals.clone()
        if applied >= 1 << 16:
            self._apply_s = apply_s / applied

    def _receive(self, meta_by_rank: Dict[int, list]
                 ) -> Tuple[set, int, str, Optional[float]]:
        """Rank 0: receives each remote rank's changed parts into the file;
        the entries changed, the bytes received, what was wrong with them
        ("" if nothing), and the seconds a value sent as a gap took to
        decode and write (None: too few to tell). Everything sent is
        received, even after an error, so no sender is left waiting."""
        torch = self._torch
        as_int = getattr(torch, _INT_OF_WIDTH[self.width])
        changed, wire, err = set(), 0, ""
        decoded, decode_s = 0, 0.0
        for r in sorted(meta_by_rank):
            for i, kind, n in meta_by_rank[r]:
                e = self._entries[i]
                region = self._region(e, self._all_boxes[r].get(i, None))
                whole = kind == "full"
                bad = "" if i in self._all_boxes[r] else "a part it does not own"
                if not bad and (n != region.numel() if whole
                                else not 0 < n <= region.numel()):
                    bad = f"{n} values for a part of {region.numel()}"
                into = torch.empty(n, dtype=self.dtype if whole else as_int)
                gaps = None if whole else torch.empty(n, dtype=torch.int16)
                if gaps is not None:
                    self.group.recv(gaps, r)
                self.group.recv(into.view(-1), r)
                wire += n * self.width + (2 * n if gaps is not None else 0)
                td = time.perf_counter()
                try:
                    if bad:
                        raise InvalidArgument(bad)
                    if whole:
                        # A part sent whole (the sender did not compare)
                        # that did not change reloads nothing.
                        new = into.view(region.shape)
                        if torch.equal(new.view(as_int), region.view(as_int)):
                            continue
                        region.copy_(new)
                    else:
                        box = region.contiguous()
                        # InvalidArgument for an index past the part.
                        _hy.gap_apply(box.view(as_int).view(-1).numpy(),
                                      gaps.numpy(), into.numpy())
                        if box is not region:
                            region.copy_(box)
                        decoded += n
                        decode_s += time.perf_counter() - td
                except (InvalidArgument, RuntimeError, IndexError) as x:
                    err = err or f"rank {r}'s {e.name}: {x}"
                changed.add(i)
        return (changed, wire, err,
                decode_s / decoded if decoded >= 1 << 16 else None)

    # -- the engines --------------------------------------------------

    def _post(self, url: str, route: str, body: Any) -> Any:
        req = urllib.request.Request(
            url + route, method="POST" if body is not None else "GET",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json",
                     **({"Authorization": "Bearer " + self.key}
                        if self.key else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                text = r.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            raise Unavailable(f"{url}{route}: HTTP {e.code}: {detail}") from e
        except (OSError, urllib.error.URLError) as e:
            raise Unavailable(f"{url}{route}: {e}") from e
        return json.loads(text) if text else None

    def _update(self, url: str, step: int, changed: set,
                prev: Optional[int]) -> EnginePush:
        """Brings one engine to `step` (rank 0): a delta against `prev`
        (the step the file held before this push) when the engine holds
        exactly that, else the whole model."""
        t0 = time.perf_counter()
        why, base = "", None
        if self.delta and prev is not None and self._engine_step[url] == prev:
            holds = (self._post(url, "/weight_info", None) or {}).get(
                "weight_version")
            if holds == str(prev):
                base = str(prev)
            else:
                why = f"engine holds {holds!r}, not {prev}"
        self._engine_step[url] = None
        if base is not None:
            try:
                push = self._send(url, step, changed, base)
                push.seconds = time.perf_counter() - t0
                return push
            except Unavailable as e:  # Refused (say, restarted): whole.
                why = str(e)
        push = self._send(url, step, None, None)
        push.error, push.seconds = why, time.perf_counter() - t0
        return push

    def _send(self, url: str, step: int, changed: Optional[set],
              base: Optional[str]) -> EnginePush:
        manifest = []
        for i, e in enumerate(self._entries):
            owner = e.alias_of if e.alias_of >= 0 else i
            item = {"name": e.name, "dtype": self.dtype_name,
                    "shape": list(e.shape), "offset": e.offset}
            if changed is not None:
                item["changed"] = owner in changed
            manifest.append(item)
        info = {"manifest_json": json.dumps(manifest), "size": self._size,
                "version": str(step), "base_version": base or "",
                "path": self._path}
        self._post(url, "/start_weight_update", {})
        try:
            self._post(url, "/update_weights", {"update_info": info})
        except Unavailable:
            try:  # vLLM has ended the session already; nothing to finish.
                self._post(url, "/finish_weight_update", {"weight_version": ""})
            except Unavailable:
                pass
            raise
        self._post(url, "/finish_weight_update", {"weight_version": str(step)})
        self._post(url, "/reset_prefix_cache", {})
        self._engine_step[url] = step
        sent = [e for i, e in enumerate(self._entries)
                if e.alias_of < 0 and (changed is None or i in changed)]
        return EnginePush(url, "delta" if base else "full", len(sent),
                          sum(e.nbytes for e in sent))

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
        if hasattr(state, "state_dict") and callable(state.state_dict):
            state = state.state_dict()
        state = dict(state)
        targets = self._targets(engines)
        if self._entries is None:
            self._open(state)
        elif [e.name for e in self._entries] != list(state):
            raise InvalidArgument("the state dict's names differ from the "
                                  "first push's: make a new EngineSync")
        prev_file = self._file_step
        self._file_step = None  # Until every rank has written.
        tw = time.perf_counter()
        written, all_changed, wire, bad, decode_s, updates = \
            self._write_step(state)
        write_s = time.perf_counter() - tw
        pushes = []
        if self.group.rank == 0 and not bad:
            pushes = self._update_engines(targets, step, all_changed,
                                          prev_file)
        pushes, wire, bad, all_changed, decode_s = self.group.all_gather(
            (pushes, wire, bad, all_changed, decode_s))[0]
        if decode_s is not None:
            self._decode_s = decode_s
        if bad:  # The file holds part of this step: no engine took it.
            self._prev.clear()
            raise DataLoss("rank 0 could not write what a rank on another "
                           f"host sent: {bad}; the next push is whole")
        self._commit(updates)
        self._file_step = step
        first_error = next((p.error for p in pushes if p.mode == "failed"), "")
        if first_error:
            raise Unavailable(first_error)
        return PushReport(
            step=step, changed_tensors=len(all_changed),
            tensors=sum(1 for e in self._entries if e.alias_of < 0),
            written_bytes=written, model_bytes=self._size,
            write_seconds=write_s, seconds=time.perf_counter() - t0,
            engines=pushes, wire_bytes=wire)

    def _targets(self, engines: Optional[Sequence[str]]) -> List[str]:
        """The URLs a push updates; InvalidArgument for one not this
        sync's."""
        targets = [u.rstrip("/") for u in (engines if engines is not None
                                           else self.urls)]
        unknown = [u for u in targets if u not in self._engine_step]
        if unknown:
            raise InvalidArgument(f"not this sync's engines: {unknown}")
        return targets

    def _write_step(self, state: Dict[str, Any]) -> Tuple[
            int, Set[str], int, str, Optional[float], List[Any]]:
        """Every rank's part of `state` into the file (collective): a rank
        on the engines' host writes its own, a remote rank sends what
        changed to rank 0, which writes it. Returns this rank's bytes, the
        names that changed (complete on rank 0), the wire bytes, rank 0's
        error writing what remote ranks sent ("" if none), its decode time
        and the updates to commit once the engines hold the step. Raises
        InvalidArgument, on every rank, when a rank could not write."""
        meta: List[Any] = []
        pieces: List[Any] = []
        updates: List[Any] = []
        try:
            if self._remote:
                meta, pieces, updates = self._collect(state)
                changed, written = [m[0] for m in meta], 0
            else:
                changed, written = self._write(state)
            err = ""
        except Exception as e:  # noqa: BLE001 (every rank must hear of it)
            changed, written, err = [], 0, f"{type(e).__name__}: {e}"
            meta, pieces = [], []
        got = self.group.all_gather((changed, err, meta))
        for rank, (_, e, _) in enumerate(got):
            if e:
                raise InvalidArgument(f"rank {rank} could not write: {e}")
        all_changed: Set[str] = set()
        for r, (c, _, _) in enumerate(got):
            if r not in self._remotes:
                all_changed.update(c)
        wire, bad, decode_s = 0, "", None
        if self.group.rank == 0 and self._remotes:
            c, wire, bad, decode_s = self._receive(
                {r: got[r][2] for r in self._remotes})
            all_changed |= c
        ts = time.perf_counter()
        for p in pieces:  # To rank 0, in the order of `meta`.
            self.group.send(p, 0)
        sent = sum(p.numel() * p.element_size() for p in pieces)
        written += sent  # What a remote rank wrote is what it sent.
        if sent >= 1 << 20:  # Enough to time the link by.
            self._wire_bps = sent / max(time.perf_counter() - ts, 1e-6)
        return written, all_changed, wire, bad, decode_s, updates

    def _update_engines(self, targets: List[str], step: int,
                        all_changed: Set[str],
                        prev_file: Optional[int]) -> List[EnginePush]:
        """Rank 0: each target engine loads the file as `step` (an engine
        left out keeps its step; see _update); one that fails is reported,
        not raised."""
        pushes = []
        for url in self.urls:
            if url not in targets:
                pushes.append(EnginePush(url, "skipped"))
                continue
            try:
                pushes.append(self._update(url, step, all_changed, prev_file))
            except Unavailable as e:
                pushes.append(EnginePush(url, "failed", error=str(e)))
        return pushes

    def close(self) -> None:
        """Unmaps the file and removes it if this sync made it."""
        self._buf = None
        if self._owner and self._path is not None:
            _unlink(self._path)
        self._unlock()
        self._owner = False

    def __enter__(self) -> "EngineSync":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
