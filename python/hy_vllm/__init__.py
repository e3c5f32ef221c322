"""hy's side of a vLLM engine: what hy starts vLLM's server with.

Loaded inside vLLM's processes, never by the trainer (which is C++):

- ``python -m hy_vllm.serve`` (``hy_vllm.serve``): starts vLLM's
  OpenAI-compatible server as one of hy's engines (the command line below,
  hy's defaults; other vLLM flags pass through); ``--print`` shows it.
- ``hy_vllm.worker.HyWorkerExtension`` (``--worker-extension-cls``): importing
  it in the worker registers the ``hy_shm`` weight-transfer backend
  (``--weight-transfer-config '{"backend": "hy_shm"}'``), which reads new
  weights from a shared-memory file the trainer's ranks wrote, in Hugging
  Face names, unfused, and applies them through vLLM's layerwise reload.
- ``hy_vllm.auth.RequireRunKey`` (``--middleware``): every route but
  ``/health`` needs the run's key (``HY_VLLM_API_KEY``), the weight-update
  and ``/collective_rpc`` routes included, which vLLM's own ``--api-key``
  leaves open.

The weight-sync protocol (between a trainer and these engines):
docs/weight-sync.md.

``hy_vllm.worker`` imports vLLM and torch; ``hy_vllm.serve`` and
``hy_vllm.auth`` import neither (serve runs before vLLM does). The package
has no dependency on ``hystate``, so it loads in vLLM's own virtual
environment; hystate's wheel ships it.
"""
