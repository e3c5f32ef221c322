"""hy's side of a vLLM engine: what hyctl train starts `vllm serve` with.

Loaded inside vLLM's processes, never by the trainer (which is C++):

- ``hy_vllm.worker.HyWorkerExtension`` (``--worker-extension-cls``): importing
  it in the worker registers the ``hy_shm`` weight-transfer backend
  (``--weight-transfer-config '{"backend": "hy_shm"}'``), which reads new
  weights from a shared-memory file the trainer's ranks wrote, in Hugging
  Face names, unfused, and applies them through vLLM's layerwise reload.
- ``hy_vllm.auth.RequireRunKey`` (``--middleware``): every route but
  ``/health`` needs the run's key (``HY_VLLM_API_KEY``), the weight-update
  and ``/collective_rpc`` routes included, which vLLM's own ``--api-key``
  leaves open.

This package imports vLLM and torch; it has no dependency on ``hy`` (the
store's Python package), so it loads in vLLM's own virtual environment.
"""
