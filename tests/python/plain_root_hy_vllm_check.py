"""Run inside a plain root (only Python, pip and the hystate wheel; no vLLM,
no torch, no hy repository): hy_vllm comes from the wheel, its serve module
imports neither vLLM nor torch, and `python -m hy_vllm.serve --print`
prints vLLM's command line, serve's flags and the ones it passes through."""

import os
import shlex
import subprocess
import sys

import hy_vllm.serve as serve

site = os.path.dirname(os.path.dirname(serve.__file__))
assert serve.__file__.startswith(sys.prefix + os.sep), serve.__file__
assert os.path.basename(site) == "site-packages", site
assert serve.PATH_DIR is None  # Installed: PYTHONPATH is left alone.
for m in ("vllm", "torch"):
    assert m not in sys.modules, m
for name in ("__init__.py", "serve.py", "worker.py", "auth.py", "py.typed"):
    assert os.path.isfile(os.path.join(site, "hy_vllm", name)), name

env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
out = subprocess.run(
    [sys.executable, "-m", "hy_vllm.serve", "--print", "--model", "/m",
     "--port", "8001", "--served-model-name", "policy", "--enforce-eager",
     "--max-num-seqs", "4", "--api-key", "k"],
    cwd="/", env=env, check=True, capture_output=True, text=True).stdout
argv = shlex.split(out)
assert argv[:3] == [sys.executable, "-m",
                    "vllm.entrypoints.openai.api_server"], argv
assert argv[-4:] == ["--max-num-seqs", "4", "--api-key", "k"], argv
for flag, value in [("--served-model-name", "policy"), ("--port", "8001"),
                    ("--host", "127.0.0.1"), ("--load-format", "dummy"),
                    ("--worker-extension-cls",
                     "hy_vllm.worker.HyWorkerExtension"),
                    ("--middleware", "hy_vllm.auth.RequireRunKey")]:
    assert argv[argv.index(flag) + 1] == value, (flag, argv)
assert argv.count("--enforce-eager") == 1, argv
print(f"ok: hy_vllm from {site}: {out.strip()}")
