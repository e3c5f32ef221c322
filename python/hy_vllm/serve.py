"""How hy starts a vLLM engine: the one place that knows vLLM's command line.

``python -m hy_vllm.serve --model DIR --port P [...]`` replaces itself
(``exec``, the same process id) with vLLM's OpenAI-compatible server as
hy's engines run: hy's worker extension and ``hy_shm`` weight-transfer
backend, the run-key middleware, on 127.0.0.1, dummy weights until hy's
first sync, vLLM's own sampling defaults (not the model directory's
generation_config) and the log-probs of the distribution sampled from.
hyctl train's engine keeper (launcher/engine_keeper.cc) starts engines this way;
``Engine`` starts one from Python (tests, benchmarks). The environment
(``environment``) carries the run's key and vLLM's CPU settings.

vLLM itself is not imported here: the module runs in vLLM's interpreter
before the server does, and in any interpreter that only starts one.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parent.parent


def command(model, port, dtype="bfloat16", max_model_len=64, seed=0,
            tensor_parallel_size=1, dummy=True, quiet=True, python=None,
            max_num_batched_tokens=None):
    """vLLM's argv for one of hy's engines on 127.0.0.1:``port``.
    ``max_num_batched_tokens``: vLLM's token budget per step (None: vLLM's
    default). Give it room for every prompt of a rollout at once: vLLM's CPU
    backend fails a seeded request whose prefill it splits over steps
    (RuntimeError "CPU Generator does not use offset", vLLM 0.32)."""
    argv = [python or sys.executable, "-m",
            "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", "hy",
            "--host", "127.0.0.1", "--port", str(port),
            "--dtype", dtype,
            "--load-format", "dummy" if dummy else "auto",
            "--enforce-eager",
            "--max-model-len", str(max_model_len),
            "--tensor-parallel-size", str(tensor_parallel_size),
            "--seed", str(seed),
            "--worker-extension-cls", "hy_vllm.worker.HyWorkerExtension",
            "--weight-transfer-config", '{"backend": "hy_shm"}',
            "--middleware", "hy_vllm.auth.RequireRunKey",
            # vLLM's sampling defaults, not generation_config.json's.
            "--generation-config", "vllm",
            # The log-probs of the distribution sampled from (after
            # temperature), as the trainer computes its own.
            "--logprobs-mode", "processed_logprobs"]
    if max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if quiet:
        argv += ["--disable-log-stats", "--disable-uvicorn-access-log"]
    return argv


def environment(key, kv_cache_gib=1, base=None):
    """The engine's environment: ``base`` (default os.environ) plus the
    run's key, the development routes hy's sync uses, hy_vllm on the path
    and vLLM's CPU settings (no core pinning: the trainer has the cores)."""
    env = dict(os.environ if base is None else base)
    path = env.get("PYTHONPATH")
    env.update(PYTHONPATH=str(PYTHON_DIR) + (":" + path if path else ""),
               VLLM_SERVER_DEV_MODE="1", HY_VLLM_API_KEY=key,
               VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib),
               VLLM_CPU_OMP_THREADS_BIND="nobind", VLLM_NO_USAGE_STATS="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SHM_DIR = "/dev/shm"
SHM_PREFIXES = ("psm_", "sem.mp-")  # multiprocessing's named segments.


def _live_group(pid):
    """The process group of ``pid``, None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[2])


def mapped_segments(pgid=None):
    """Names under /dev/shm with SHM_PREFIXES that the live processes of
    group ``pgid`` (None: of any group) map."""
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        g = _live_group(int(d))
        if g is None or (pgid is not None and g != pgid):
            continue
        try:
            with open(f"/proc/{d}/maps", errors="replace") as f:
                for line in f:
                    at = line.find(SHM_DIR + "/")
                    if at < 0 or line.endswith(" (deleted)\n"):
                        continue
                    name = line[at + len(SHM_DIR) + 1:].rstrip("\n")
                    if name.startswith(SHM_PREFIXES) and "/" not in name:
                        out.add(name)
        except OSError:
            pass
    return out


def reclaim_segments(pgid, seen, wait=5.0):
    """Unlinks ``seen`` (names that group ``pgid`` mapped) once the group
    has no live process and no live process maps them; returns the names
    unlinked. A SIGKILLed vLLM engine leaves its message queues' ring
    buffers in /dev/shm (launcher/shm_segments.h does the same for hyctl
    train's engines)."""
    deadline = time.time() + wait
    while any(_live_group(int(d)) == pgid
              for d in os.listdir("/proc") if d.isdigit()):
        if time.time() > deadline:
            return []
        time.sleep(0.02)
    in_use = mapped_segments() & seen
    gone = []
    for name in sorted(seen - in_use):
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            gone.append(name)
        except FileNotFoundError:
            pass
    return gone


class Engine:
    """One engine started from Python and waited for until it answers
    /health; ``close`` kills its process group (vLLM's engine core and
    workers too) and removes the shared memory vLLM then leaves in
    /dev/shm. Raises RuntimeError if vLLM exits or does not answer
    within ``timeout`` seconds (its log says why)."""

    def __init__(self, model, log_path, dtype="bfloat16", dummy=True,
                 python=None, timeout=600, **kwargs):
        self.port = free_port()
        self.key = os.urandom(16).hex()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = open(log_path, "w")
        t0 = time.time()
        self.proc = subprocess.Popen(
            command(model, self.port, dtype=dtype, dummy=dummy,
                    python=python, **kwargs),
            stdout=self.log, stderr=subprocess.STDOUT,
            env=environment(self.key), start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                self.log.close()
                raise RuntimeError(f"vLLM exited {self.proc.returncode}; "
                                   f"see {log_path}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2)
                break
            except OSError:
                if time.time() - t0 > timeout:
                    self.close()
                    raise RuntimeError(f"vLLM did not answer within "
                                       f"{timeout} s; see {log_path}")
                time.sleep(0.5)
        self.start_s = time.time() - t0

    def request(self, path, body=None, key=True, timeout=120):
        """GET (or POST ``body`` as JSON) with the run's key; the reply's
        JSON. urllib's HTTPError for a status >= 400."""
        req = urllib.request.Request(
            self.url + path, method="POST" if body is not None else "GET",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json",
                     **({"Authorization": "Bearer " + self.key}
                        if key else {})})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def greedy(self, prompts, n):
        """(token ids, log-probs) of ``n`` greedy tokens after each prompt
        (a list of token ids), end of sequence ignored."""
        out = []
        for p in prompts:
            c = self.request("/v1/completions", {
                "model": "hy", "prompt": p, "max_tokens": n,
                "temperature": 0, "logprobs": 0, "return_token_ids": True,
                "ignore_eos": True})
            ch = c["choices"][0]
            out.append((ch["token_ids"], ch["logprobs"]["token_logprobs"]))
        return out

    def close(self):
        seen = mapped_segments(self.proc.pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        reclaim_segments(self.proc.pid, seen)
        if not self.log.closed:
            self.log.close()


def main():
    ap = argparse.ArgumentParser(
        description="Start vLLM's server as one of hy's engines (exec).")
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-model-len", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None,
                    help="vLLM's token budget per step (default: vLLM's)")
    ap.add_argument("--print", action="store_true",
                    help="print the command instead of running it")
    a = ap.parse_args()
    argv = command(a.model, a.port, dtype=a.dtype,
                   max_model_len=a.max_model_len, seed=a.seed,
                   tensor_parallel_size=a.tensor_parallel_size,
                   max_num_batched_tokens=a.max_num_batched_tokens)
    if a.print:
        print(" ".join(argv))
        return
    # Run by hand (hystate.vllm's engines): what hyctl train's keeper sets,
    # where the caller has not set it.
    if not os.environ.get("HY_VLLM_API_KEY"):
        sys.exit("hy_vllm.serve: set HY_VLLM_API_KEY to the engine's key "
                 "(every route but /health needs it)")
    for k, v in environment(os.environ["HY_VLLM_API_KEY"], base={}).items():
        if k != "PYTHONPATH":
            os.environ.setdefault(k, v)
    path = os.environ.get("PYTHONPATH", "")
    if str(PYTHON_DIR) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(PYTHON_DIR) + (
            os.pathsep + path if path else "")
    sys.stdout.flush()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
