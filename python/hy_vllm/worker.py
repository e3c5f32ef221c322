"""The ``hy_shm`` weight-transfer backend and the worker extension.

The trainer's ranks write the actor's weights, in the engine's dtype, into
one shared-memory file per host (``/dev/shm/...``) and send a manifest:
``[{"name", "dtype", "shape", "offset"}]`` with Hugging Face's parameter
names, unfused (``q_proj``/``k_proj``/``v_proj``, ``gate_proj``/``up_proj``:
vLLM fuses them itself) and ``lm_head.weight`` for a tied model (an alias of
the embedding's bytes: the layerwise reload would otherwise leave the head
stale). The backend maps the file (no copy: the tensors handed to
``load_weights`` are views of the mapping) and loads them through vLLM's
layerwise reload (``initialize_layerwise_reload`` in
``start_weight_update``, ``finalize_layerwise_reload`` in
``finish_weight_update``), which re-runs the CPU weight packing that makes a
plain ``load_weights`` fail from the second update on.

Every tensor-parallel worker maps the same file and takes its own slice
(vLLM's weight loaders slice full tensors).
"""

import json
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


class ShmWeightTransferEngine(WeightTransferEngine[ShmInitInfo, ShmUpdateInfo]):
    init_info_cls = ShmInitInfo
    update_info_cls = ShmUpdateInfo
    supports_draft_weight_update = False

    path = None

    def init_transfer_engine(self, init_info):
        self.path = init_info.path

    def start_weight_update(self):
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def update_weights(self, update_info):
        # As the base class, without torch.accelerator.synchronize(): the
        # copies are done when load_weights returns, on the CPU.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info):
        if self.path is None:
            raise RuntimeError("hy_shm: init_weight_transfer_engine was not called")
        manifest = json.loads(update_info.manifest_json)
        self.model.load_weights(_views(self.path, manifest, update_info.size))

    def finish_weight_update(self):
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)

    def shutdown(self):
        self.path = None


if "hy_shm" not in WeightTransferEngineFactory._registry:
    WeightTransferEngineFactory.register_engine("hy_shm", ShmWeightTransferEngine)


class HyWorkerExtension:
    """Methods added to vLLM's workers (reached through /collective_rpc)."""

    def hy_weights_crc32(self):
        """CRC-32 of every parameter's bytes as the model holds them, by name:
        for tests that two engines (or two updates) hold the same weights."""
        model = self.model_runner.get_model()
        out = {}
        for name, p in model.named_parameters():
            t = p.detach().contiguous().cpu()
            out[name] = zlib.crc32(t.view(torch.uint8).numpy().tobytes()) if t.numel() else 0
        return out
