"""The ``hy_shm`` weight-transfer backend and the worker extension.

``ShmWeightTransferEngine`` (registered as ``hy_shm`` in vLLM's
``WeightTransferEngineFactory``) loads the weights a trainer wrote into a
shared-memory file: it maps the file (no copy: the tensors handed to
``load_weights`` are views of the mapping; every tensor-parallel worker
maps it and vLLM's loaders take their slice) and loads them through
vLLM's layerwise reload (``initialize_layerwise_reload`` in
``update_weights``, ``finalize_layerwise_reload`` in
``finish_weight_update``), which re-runs the CPU weight packing that makes
a plain ``load_weights`` fail from the second update on. It remembers the
version its model holds and refuses a delta against another. A delta
reloads each vLLM layer that a changed tensor feeds, whole, and leaves the
others; the layerwise reload's "Failed to load weights" warning for those
is expected and filtered. ``HyWorkerExtension`` adds ``hy_last_update``
and ``hy_weights_crc32`` (``/collective_rpc``).

The protocol (the file, the manifest, the routes, versions and deltas,
what the backend refuses): docs/weight-sync.md.
"""

import json
import logging
import os
import time
import zlib
from dataclasses import dataclass

import torch

from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory


def _allow_amx():
    """Asks Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)
    before vLLM's CPU kernels use it. On a CPU with AMX, vLLM 0.32 sends
    small bf16 GEMMs to its sgl kernels, which execute tile instructions
    without asking; a process that has not asked gets SIGILL (the worker
    died at its first bf16 forward of a 3-token prompt, exit -4). oneDNN
    asks for itself, but only on its own first AMX use."""
    try:
        if torch.cpu._is_amx_tile_supported():
            torch._C._cpu._init_amx()
    except (AttributeError, RuntimeError):
        pass


_allow_amx()

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


@dataclass
class ShmInitInfo(WeightTransferInitInfo):
    path: str


@dataclass
class ShmUpdateInfo(WeightTransferUpdateInfo):
    manifest_json: str
    # The file's size the trainer wrote: a shorter file is refused.
    size: int = 0
    # The version this update makes ("" unnamed: hyctl train names it in
    # finish_weight_update instead) and, for a delta, the one it was
    # computed against.
    version: str = ""
    base_version: str = ""
    # The file, when not the one init_weight_transfer_engine named
    # (hystate.vllm names it in every update: several syncs may take
    # turns on one engine).
    path: str = ""


def _views(path, manifest, size):
    end = 0
    for e in manifest:
        n = 1
        for d in e["shape"]:
            n *= d
        e["_bytes"] = n * _DTYPES[e["dtype"]].itemsize
        end = max(end, e["offset"] + e["_bytes"])
    if size and size < end:
        raise ValueError(f"hy_shm: manifest reaches byte {end} of a {size}-byte file")
    buf = torch.from_file(path, shared=True, size=max(end, 1), dtype=torch.uint8)
    for e in manifest:
        t = buf[e["offset"]:e["offset"] + e["_bytes"]].view(_DTYPES[e["dtype"]]).view(e["shape"])
        yield e["name"], t


def _test_fault(views):
    """A test hook: HY_TEST_ENGINE_FAULT=hang-mid-load:<marker> makes the
    first load that finds no file at <marker> create it and hang after half
    of its tensors (the engine answers /health, the update never returns),
    as an engine stuck inside a load would; the engine that the trainer's
    kill and the keeper's restart bring up finds the marker and loads.
    Unset, it costs a dictionary lookup."""
    kind, _, marker = os.environ.get("HY_TEST_ENGINE_FAULT", "").partition(":")
    if kind != "hang-mid-load" or not marker:
        return views
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return views
    views = list(views)
    logging.getLogger(__name__).warning(
        "HY_TEST_ENGINE_FAULT: hanging after %d of %d tensors", len(views) // 2, len(views))

    def hang_halfway():
        yield from views[:len(views) // 2]
        while True:
            time.sleep(3600)

    return hang_halfway()


def _layer_keys(manifest, packed):
    """The vLLM layer each entry feeds: its module path, with an unfused
    name mapped to the fused module (``packed``: the model's
    packed_modules_mapping, e.g. q_proj -> qkv_proj); entries that share
    bytes (a tied head and its embedding) feed one layer."""
    unfused = {part: fused for fused, parts in packed.items() for part in parts}
    by_offset = {}
    keys = []
    for e in manifest:
        module = e["name"].rsplit(".", 1)[0]
        head, _, last = module.rpartition(".")
        key = (head + "." if head else "") + unfused.get(last, last)
        key = by_offset.setdefault((e["offset"], tuple(e["shape"])), key)
        keys.append(key)
    return keys


class _DropUnloadedWarning(logging.Filter):
    """A delta leaves the unchanged layers unloaded on purpose."""

    def filter(self, record):
        return "Failed to load weights" not in record.getMessage()


class ShmWeightTransferEngine(WeightTransferEngine[ShmInitInfo, ShmUpdateInfo]):
    init_info_cls = ShmInitInfo
    update_info_cls = ShmUpdateInfo
    supports_draft_weight_update = False

    path = None
    # The version the model holds, as named updates left it; None: unknown.
    version = None
    # What the open update did: None until weights arrive, then its stats.
    pending = None
    last = None
    reloading = False

    def init_transfer_engine(self, init_info):
        self.path = init_info.path

    def start_weight_update(self):
        # The layerwise reload starts with the weights (receive_weights):
        # vLLM ends a session whose update raised without calling
        # finish_weight_update, and a model left initialized for a reload
        # cannot serve.
        self.pending = None
        self.reloading = False

    def update_weights(self, update_info):
        # As the base class, without torch.accelerator.synchronize(): the
        # copies are done when load_weights returns, on the CPU.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info):
        base = update_info.base_version
        if base and base != self.version:
            raise ValueError(f"hy_shm: a delta against version {base!r}, but "
                             f"this engine holds {self.version!r}: send it whole")
        path = update_info.path or self.path
        if path is None:
            raise RuntimeError("hy_shm: init_weight_transfer_engine was not called")
        manifest = json.loads(update_info.manifest_json)
        if base:
            keys = _layer_keys(manifest, getattr(self.model, "packed_modules_mapping", {}))
            changed = {k for k, e in zip(keys, manifest) if e.get("changed", True)}
            manifest = [e for k, e in zip(keys, manifest) if k in changed]
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        # From here the model may hold neither version until this succeeds.
        self.version = None
        views = list(_views(path, manifest, update_info.size))
        _begin_capture(self, manifest, views)  # The digest (issue 74).
        initialize_layerwise_reload(self.model)
        self.reloading = True
        try:
            self.model.load_weights(_test_fault(views))
        except BaseException:
            # Back to serving: the layers not loaded get their tensors back.
            self._finalize(quiet=True)
            raise
        self.pending = {"version": update_info.version, "delta": bool(base),
                        "tensors": len(manifest),
                        "bytes": sum(e["_bytes"] for e in manifest)}

    def finish_weight_update(self):
        if self.reloading:
            self._finalize(quiet=self.pending is not None and self.pending["delta"])
        if self.pending is not None:
            self.pending.update(getattr(self, "_hy_digest_stats", None) or {})
            self._hy_digest_stats = None
            self.version = self.pending["version"] or None
            self.last = self.pending
        self.pending = None

    def _finalize(self, quiet):
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        self.reloading = False
        drop = _DropUnloadedWarning()
        log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
        if quiet:
            log.addFilter(drop)
        try:
            finalize_layerwise_reload(self.model, self.model_config)
        finally:
            log.removeFilter(drop)
            self._hy_digest_stats = _end_capture(self)

    def shutdown(self):
        self.path = None
        self.version = None


if "hy_shm" not in WeightTransferEngineFactory._registry:
    WeightTransferEngineFactory.register_engine("hy_shm", ShmWeightTransferEngine)


class HyWorkerExtension:
    """Methods added to vLLM's workers (reached through /collective_rpc)."""

    def hy_last_update(self):
        """What the last finished hy_shm update loaded: {"version", "delta",
        "tensors", "bytes"} (None before the first)."""
        engine = getattr(self, "weight_transfer_engine", None)
        return getattr(engine, "last", None)

    def hy_weights_crc32(self):
        """CRC-32 of every parameter's bytes as the model holds them, by name:
        for tests that two engines (or two updates) hold the same weights.

        On the CPU vLLM packs a linear layer's weight for its GEMM kernel
        (oneDNN or sgl's packing) and leaves an empty parameter behind; the
        packed weight is then read back through the layer's own kernel, as
        the product of an identity matrix with it (exact: one product of 1
        per output, no sum of two nonzero terms), and its bytes stand for
        the weight's."""
        model = self.model_runner.get_model()
        out = {}
        for name, p in model.named_parameters():
            t = p.detach().contiguous().cpu()
            out[name] = zlib.crc32(t.view(torch.uint8).numpy().tobytes()) if t.numel() else 0
        with torch.no_grad():
            for name, m in model.named_modules():
                w = getattr(m, "weight", None)
                k = getattr(m, "input_size_per_partition", None)
                if w is None or w.numel() or k is None or not hasattr(m, "cpu_linear"):
                    continue
                t = m.cpu_linear(torch.eye(k, dtype=w.dtype), w, None).contiguous()
                out[name + ".weight"] = zlib.crc32(t.view(torch.uint8).numpy().tobytes())
        return out


# -- the weight digest (issue 74) ----------------------------------------
#
# What it is: xxh3-64 (seed 0; hy::Checksum64, libxxhash's XXH3_64bits) of
# each Hugging Face tensor's bytes in the engine's dtype, row-major, as 16
# lowercase hex digits: what a trainer computes of each manifest entry's
# bytes while it writes them.
#
# Where the engine takes it: inside the update, at the moment each vLLM
# layer's parameters hold the loaded values in their final (fused, sliced)
# layout and before vLLM's CPU code repacks a linear weight for its GEMM
# kernel (oneDNN / sgl) and empties the parameter. Each HF name's slot in
# the fused parameter is found from the model's packed_modules_mapping and
# the layer's shard offsets (QKVParallelLinear's q/k/v mapping,
# MergedColumnParallelLinear's output_sizes), independently of the loader
# that wrote it, so a tensor written at the wrong offset, cast or sliced
# wrongly, or not written at all shows as a different digest. Right after
# the repacking, a sample of the packed weight is read back through the
# kernel (an identity's rows: exact) and compared with the parameter it
# was packed from; a difference marks the layer's names "kernel!<hex>".
# A parameter that stays a tensor (norms, biases, the embedding, weights
# left unpacked on CPUs without the kernels) is hashed again live by
# hy_weights_digest. A tied head (model.lm_head is the embedding module)
# is listed as lm_head.weight with the embedding's digest.

# Off unless HY_VLLM_DIGEST=1: no trainer compares the digest yet (issue
# 74: hyctl train and EngineSync will, every sync, and turn it on).
_HY_DIGEST = os.environ.get("HY_VLLM_DIGEST", "0") not in ("0", "off", "")
# Input columns of each checked packed weight read back through its kernel
# (0: none), and how many packed layers (chosen at random) are checked per
# update: each check builds a oneDNN primitive for the new weight (1-3 ms
# a layer on 2 busy cores, most of the check), so checking every layer
# would cost about 10% of a sync. Every layer is checked structurally
# (its kernel was rebuilt after its bytes were hashed) at no cost.
_HY_DIGEST_SAMPLE = int(os.environ.get("HY_VLLM_DIGEST_SAMPLE", "16"))
_HY_DIGEST_KERNEL_LAYERS = int(os.environ.get("HY_VLLM_DIGEST_KERNEL_LAYERS",
                                              "4"))

_xxh3_fn = None


def _xxh3_lib():
    global _xxh3_fn
    if _xxh3_fn is None:
        import ctypes
        import ctypes.util
        lib = None
        for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
            if name:
                try:
                    lib = ctypes.CDLL(name)
                    break
                except OSError:
                    pass
        if lib is not None:
            lib.XXH3_64bits.restype = ctypes.c_uint64
            lib.XXH3_64bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            _xxh3_fn = lambda ptr, n: lib.XXH3_64bits(ptr, n)  # noqa: E731
        else:
            try:
                import xxhash
            except ImportError:
                _xxh3_fn = False
            else:
                def _py(ptr, n):
                    import ctypes
                    return xxhash.xxh3_64_intdigest(
                        (ctypes.c_char * n).from_address(ptr) if n else b"")
                _xxh3_fn = _py
    return _xxh3_fn


def tensor_digest(t):
    """xxh3-64 of a tensor's bytes (row-major, its dtype), 16 hex digits;
    what a trainer computes of a manifest entry's bytes."""
    fn = _xxh3_lib()
    if not fn:
        raise RuntimeError("hy_vllm: the weight digest needs libxxhash "
                           "(apt install libxxhash0) or the xxhash package")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    return "%016x" % fn(t.data_ptr(), t.numel() * t.element_size())


def _hf_slots(model):
    """{id(module): [(hf_name, param_name, dim, start, size)]} and the tied
    aliases {hf_name: owner hf_name}: where each Hugging Face tensor lives in
    vLLM's parameters (dim None: the whole parameter). vLLM's names are taken
    for HF's but for the fused modules (hf_to_vllm_mapper renames are not
    undone: none for Qwen2/Qwen3/Llama)."""
    packed = getattr(model, "packed_modules_mapping", {}) or {}
    slots, owner_of, aliases = {}, {}, {}
    for mname, m in model.named_modules(remove_duplicate=False):
        head, _, last = mname.rpartition(".")
        prefix = (head + "." if head else "")
        for pname, p in m.named_parameters(recurse=False):
            if id(m) in slots and any(s[1] == pname for s in slots[id(m)]):
                # A module seen under a second name: a tied one.
                first = next(s[0] for s in slots[id(m)] if s[1] == pname
                             and s[2] is None)
                aliases[f"{mname}.{pname}"] = first
                continue
            parts = packed.get(last)
            out = []
            if parts and hasattr(m, "_get_shard_offset_mapping") and \
                    len(parts) == 3:
                dim = getattr(p, "output_dim", 0)
                for part, sid in zip(parts, ("q", "k", "v")):
                    out.append((f"{prefix}{part}.{pname}", pname, dim,
                                m._get_shard_offset_mapping(sid),
                                m._get_shard_size_mapping(sid)))
            elif parts and hasattr(m, "output_sizes"):
                dim = getattr(p, "output_dim", 0)
                tp = getattr(m, "tp_size", 1)
                at = 0
                for part, n in zip(parts, m.output_sizes):
                    out.append((f"{prefix}{part}.{pname}", pname, dim,
                                at // tp, n // tp))
                    at += n
            else:
                out.append((f"{mname}.{pname}", pname, None, 0, 0))
            slots.setdefault(id(m), []).extend(out)
            for o in out:
                owner_of[o[0]] = o
    return slots, aliases


def _slot(param, dim, start, size, shape):
    """The part of `param` that holds one HF tensor (`shape`: its shape,
    when known: a padded vocabulary's rows past it are cut off)."""
    t = param if dim is None else param.narrow(dim, start, size)
    if shape is not None and list(t.shape) != list(shape) and \
            len(shape) == t.dim() and all(a <= b for a, b in
                                          zip(shape, t.shape)):
        for d, n in enumerate(shape):
            t = t.narrow(d, 0, n)
    return t


class _DigestCapture:
    """The digest taken while one update loads (see above)."""

    def __init__(self, model, slots, shapes, views, store):
        self.model = model
        self.slots = slots
        self.shapes = shapes  # {hf_name: shape} of this update's manifest
        self.names_at = {}
        for name, t in views:
            if t.numel():
                self.names_at.setdefault((t.data_ptr(), tuple(t.shape)),
                                         []).append(name)
        self.consumed = set()
        self.store = store  # {hf_name: hex}, the backend's, updated per layer
        self.seconds = 0.0
        self.kernel_seconds = 0.0  # Of seconds: the kernel read-back.
        self.kernel_checked = 0
        self.kernel_mismatch = []
        self.tp = _tp()
        packed = [m for m in model.modules() if hasattr(m, "cpu_linear")]
        pick = torch.randperm(len(packed))[:_HY_DIGEST_KERNEL_LAYERS].tolist()
        self.kernel_sample = {id(packed[i]) for i in pick}

    def _mark(self, layer):
        self.kernel_mismatch.append(layer)
        for name, pname, *_ in self.slots.get(id(layer), ()):
            if pname == "weight" and name in self.store and \
                    not self.store[name].startswith("kernel!"):
                self.store[name] = "kernel!" + self.store[name]

    def note_loaded(self, info):
        for _, args in info.loaded_weights:
            w = args.arguments.get("loaded_weight")
            if isinstance(w, torch.Tensor) and w.numel():
                self.consumed.update(self.names_at.get(
                    (w.data_ptr(), tuple(w.shape)), ()))

    def hash_layer(self, layer):
        t0 = time.perf_counter()
        for name, pname, dim, start, size in self.slots.get(id(layer), ()):
            p = getattr(layer, pname, None)
            if not isinstance(p, torch.Tensor) or not p.numel():
                continue
            h = tensor_digest(_slot(p.data, dim, start, size,
                                    self.shapes.get(name)))
            self.store[name] = h if self.tp is None else f"tp{self.tp}:{h}"
        self.seconds += time.perf_counter() - t0

    def check_kernel(self, layer, weight, kernel_before):
        """After the repacking: a weight emptied by it must have a new kernel
        (built from `weight`, the parameter just hashed); for the layers in
        this update's sample, 16 input columns of the packed weight are read
        back through the kernel and compared with `weight`."""
        k = _HY_DIGEST_SAMPLE
        lin = getattr(layer, "cpu_linear", None)
        w_now = getattr(layer, "weight", None)
        if lin is not None and lin is kernel_before and \
                isinstance(w_now, torch.Tensor) and not w_now.numel():
            self._mark(layer)  # Serving a kernel built before this load.
            return
        if not k or lin is None or weight is None or weight.dim() != 2 or \
                not weight.numel() or id(layer) not in self.kernel_sample:
            return
        t0 = time.perf_counter()
        n_out, n_in = weight.shape
        cols = torch.randperm(n_in)[:k]
        eye = torch.zeros(len(cols), n_in, dtype=weight.dtype)
        eye[torch.arange(len(cols)), cols] = 1
        with torch.no_grad():
            got = lin(eye, layer.weight, None)
        want = weight.index_select(1, cols).t()
        same = got.shape == want.shape and bool(
            ((got == want) | (got.isnan() & want.isnan())).all())
        if not same:
            self._mark(layer)
        self.kernel_checked += 1
        dt = time.perf_counter() - t0
        self.seconds += dt
        self.kernel_seconds += dt


def _tp():
    """None for one tensor-parallel rank, else "rank/size" (each rank's
    digest is of its slice, which a trainer's whole-tensor digest does not
    match)."""
    try:
        from vllm.distributed import (get_tensor_model_parallel_rank,
                                      get_tensor_model_parallel_world_size)
        n = get_tensor_model_parallel_world_size()
        return None if n == 1 else f"{get_tensor_model_parallel_rank()}/{n}"
    except Exception:  # noqa: BLE001 (no group: one rank)
        return None


_ACTIVE_CAPTURE = None


def _install_capture_hook():
    """Wraps vLLM's layerwise reload's per-layer step so that an active
    _DigestCapture sees each layer between its load and its repacking."""
    from vllm.model_executor.model_loader.reload import layerwise

    if getattr(layerwise._layerwise_process, "_hy_digest", False):
        return
    original = layerwise._layerwise_process

    def _layerwise_process(layer, info):
        cap = _ACTIVE_CAPTURE
        if cap is None:
            return original(layer, info)
        cap.note_loaded(info)
        qm = getattr(layer, "quant_method", None)
        pwal = getattr(qm, "process_weights_after_loading", None)
        if qm is None or pwal is None:
            out = original(layer, info)
            cap.hash_layer(layer)
            return out
        had = "process_weights_after_loading" in vars(qm)

        def process_weights_after_loading(lyr, *a, **kw):
            cap.hash_layer(lyr)
            w = getattr(lyr, "weight", None)
            w = w.data if isinstance(w, torch.Tensor) else None
            before = getattr(lyr, "cpu_linear", None)
            r = pwal(lyr, *a, **kw)
            cap.check_kernel(lyr, w, before)
            return r

        qm.process_weights_after_loading = process_weights_after_loading
        try:
            return original(layer, info)
        finally:
            if had:
                qm.process_weights_after_loading = pwal
            else:
                del qm.process_weights_after_loading

    _layerwise_process._hy_digest = True
    layerwise._layerwise_process = _layerwise_process


def _begin_capture(engine, manifest, views):
    """Called by the backend before load_weights: starts the digest of this
    update (None when off)."""
    global _ACTIVE_CAPTURE
    if not _HY_DIGEST or not _xxh3_lib():
        return None
    _install_capture_hook()
    if getattr(engine, "_hy_slots", None) is None:
        engine._hy_slots = _hf_slots(engine.model)
        engine.digests = {}
    shapes = {e["name"]: e["shape"] for e in manifest}
    engine._hy_shapes = {**getattr(engine, "_hy_shapes", {}), **shapes}
    _ACTIVE_CAPTURE = _DigestCapture(engine.model, engine._hy_slots[0],
                                     shapes, views, engine.digests)
    return _ACTIVE_CAPTURE


def _end_capture(engine):
    """Called after the reload is finalized: what the update's digest
    found (merged into the open update's stats)."""
    global _ACTIVE_CAPTURE
    cap, _ACTIVE_CAPTURE = _ACTIVE_CAPTURE, None
    if cap is None:
        return {}
    skipped = sorted(n for n in cap.shapes if n not in cap.consumed)
    return {"digest_s": round(cap.seconds, 6),
            "digest_kernel_s": round(cap.kernel_seconds, 6),
            "kernel_checked": cap.kernel_checked, "skipped": skipped,
            "kernel_mismatch": len(cap.kernel_mismatch)}


def _engine_digest(engine, names=None, live=True):
    """{hf_name: hex}: the stored digest of every HF tensor, the parameters
    that are still tensors hashed again now (live)."""
    model = engine.model
    if getattr(engine, "_hy_slots", None) is None:
        engine._hy_slots = _hf_slots(model)
        engine.digests = {}
    slots, aliases = engine._hy_slots
    out = dict(engine.digests)
    shapes = getattr(engine, "_hy_shapes", {})
    tp = _tp()
    if live:
        for m in model.modules():
            for name, pname, dim, start, size in slots.get(id(m), ()):
                if names is not None and name not in names:
                    continue
                p = getattr(m, pname, None)
                if isinstance(p, torch.Tensor) and p.numel():
                    h = tensor_digest(_slot(p.data, dim, start, size,
                                            shapes.get(name)))
                    prev = out.get(name, "")
                    out[name] = ("kernel!" if prev.startswith("kernel!")
                                 else "") + (h if tp is None
                                             else f"tp{tp}:{h}")
    for alias, owner in aliases.items():
        if owner in out:
            out[alias] = out[owner]
    if names is not None:
        out = {n: out[n] for n in names if n in out}
    return out


def _hy_weights_digest(self, names=None, live="1"):
    """The weight digest (see "the weight digest" in hy_vllm/worker.py):
    {hf_name: xxh3-64 hex} of every tensor the engine serves, as of its last
    update. ``names``: a JSON list (or comma-separated string) to restrict
    it; ``live`` "0": the digest taken at the last update only, without
    hashing the unpacked parameters again. A name the engine does not hold
    is absent; a packed weight whose kernel copy differs from what was
    loaded reads "kernel!<hex>"."""
    engine = getattr(self, "weight_transfer_engine", None)
    if engine is None or getattr(engine, "model", None) is None:
        return {}
    if isinstance(names, str):
        names = json.loads(names) if names.startswith("[") else \
            [n for n in names.split(",") if n]
    return _engine_digest(engine, set(names) if names else None,
                          live=str(live) not in ("0", "false", "False"))


def _hy_weights_readback_s(self, sample="0"):
    """Benchmark only: seconds to read every packed linear weight back
    through its kernel (``sample`` "0": the whole weight, an identity of its
    input width; n: n input columns), without hashing."""
    model = self.model_runner.get_model()
    t0 = time.perf_counter()
    n = int(sample)
    with torch.no_grad():
        for m in model.modules():
            w = getattr(m, "weight", None)
            k = getattr(m, "input_size_per_partition", None)
            if w is None or w.numel() or k is None or \
                    not hasattr(m, "cpu_linear"):
                continue
            rows = k if n <= 0 else min(n, k)
            m.cpu_linear(torch.eye(k, dtype=w.dtype)[:rows], w, None)
    return time.perf_counter() - t0


def _hy_views_digest_s(self, path, manifest_json):
    """Benchmark only: seconds to hash a manifest's views of the file
    (option (a): the bytes the loader is handed) and the digest."""
    manifest = json.loads(manifest_json)
    t0 = time.perf_counter()
    out = {n: tensor_digest(t) for n, t in _views(path, manifest, 0)}
    return {"seconds": time.perf_counter() - t0, "digest": out}


HyWorkerExtension.hy_weights_digest = _hy_weights_digest
HyWorkerExtension.hy_weights_readback_s = _hy_weights_readback_s
HyWorkerExtension.hy_views_digest_s = _hy_views_digest_s
