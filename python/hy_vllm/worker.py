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
