"""How hy starts a vLLM engine: the one place that knows vLLM's command line.

``python -m hy_vllm.serve --model DIR [serve's flags] [vLLM's flags]``
replaces itself (``exec``, the same process id) with vLLM's
OpenAI-compatible server (``vllm.entrypoints.openai.api_server``, in the
same interpreter) set up as hy's engines run: hy's worker extension and
``hy_shm`` weight-transfer backend, the run-key middleware (every route but
``/health`` needs ``Authorization: Bearer $HY_VLLM_API_KEY``), vLLM's
development routes (``VLLM_SERVER_DEV_MODE=1``: the weight-update routes),
vLLM's own sampling defaults (not the model directory's
generation_config) and the log-probs of the distribution sampled from.
hyctl train's engine keeper (launcher/engine_keeper.cc) starts its engines
this way; ``Engine`` starts one from Python (tests, benchmarks);
``--print`` prints the command instead of running it.

Serve's own flags (``--help``), with their defaults: ``--model``
(required), ``--host`` 127.0.0.1, ``--port`` 8000, ``--served-model-name``
hy, ``--load-format`` dummy (random weights until hy's first weight sync
fills them; ``auto`` loads the directory's), ``--dtype`` bfloat16,
``--max-model-len`` (the model's), ``--seed`` 0, ``--tensor-parallel-size``
/ ``-tp`` 1, ``--max-num-batched-tokens`` and ``--[no-]enable-chunked-prefill``
(below), ``--[no-]enforce-eager`` on, ``--generation-config`` vllm,
``--logprobs-mode`` processed_logprobs, ``--[no-]disable-log-stats`` and
``--[no-]disable-uvicorn-access-log`` on. Every other argument goes to
vLLM's server unchanged, in its order. Each flag reaches vLLM once: every
flag serve puts on the command line is one of its own, so giving it again
(also in vLLM's spellings: ``--max_model_len``, ``--flag=value``, ``-tp``)
replaces serve's value instead of repeating it. Three settings belong to
hy's weight sync and key: ``--worker-extension-cls`` and
``--weight-transfer-config`` may be given only as serve sets them (else an
error), and ``--middleware`` adds a middleware after hy's key middleware.

Token budget: vLLM 0.32's CPU backend fails a seeded request whose prefill
it splits over steps (RuntimeError "CPU Generator does not use offset":
the model runner rewinds the request's generator after a partial prefill,
which a CPU generator cannot), and hy seeds every request. Without
``--max-num-batched-tokens``, serve turns chunked prefill off
(``--no-enable-chunked-prefill``): vLLM then never splits a prompt (one
that does not fit a step's budget waits for the next) and sizes the budget
itself to max(max-model-len, 2048 x tensor-parallel size x
pipeline-parallel size), so the largest prefill, a whole context, fits one
step. With ``--max-num-batched-tokens N`` given, chunked prefill stays
vLLM's default (on), and N must hold every prompt prefilled at once (hyctl
train's keeper gives batch size x samples x prompt length); a
``--[no-]enable-chunked-prefill`` given wins either way. Measured here (tiny
Qwen3, float32, 8 concurrent seeded requests of 100-token prompts, budget
128): chunked prefill on, all 8 failed (HTTP 500) and the engine core died;
off, all 8 were served. The alternative, chunked prefill on with a budget
of max-model-len x max-num-seqs, would size vLLM's per-token buffers to it
(its model runner allocates inputs_embeds of budget x hidden size in the
engine's dtype: 3.5 GiB for a 4096-token context, 128 sequences and a
3584-wide bf16 model; read in vLLM 0.32's source, not measured). Chunked
prefill off costs its overlap of long prefills with decodes, and vLLM logs
a generic warning ("This model does not officially support disabling
chunked prefill") for any generating model with it turned off by hand.

Model name: the engine answers to ``--served-model-name`` (default hy). An
OpenAI request may also leave ``model`` out (or send ""), which vLLM takes
as the served model; hy's own clients (the trainer's engine client,
``Engine.greedy``) do that, so they work whatever the name.

The environment: ``HY_VLLM_API_KEY`` must be set; serve adds vLLM's CPU
settings and the development routes where the caller has not set them
(``environment``), and the directory hy_vllm lives in to ``PYTHONPATH``
when that is a source tree (not site-packages: an installed hy_vllm is on
the interpreter's path already).

vLLM itself is not imported here: the module runs in vLLM's interpreter
before the server does, and in any interpreter that only starts one or
prints its command.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any, Mapping, Sequence, Union

# A path as the functions below take it.
StrPath = Union[str, "os.PathLike[str]"]

PYTHON_DIR = Path(__file__).resolve().parent.parent
# PYTHON_DIR when a child interpreter needs it on PYTHONPATH to import
# hy_vllm (a source tree, or `pip install --target DIR`); None when hy_vllm
# is installed in site-packages, which must not go on another interpreter's
# path (it would shadow that interpreter's packages and standard library).
PATH_DIR: Path | None = (
    None if PYTHON_DIR.name in ("site-packages", "dist-packages")
    else PYTHON_DIR)

SERVED_MODEL_NAME = "hy"
HY_EXTENSION = "hy_vllm.worker.HyWorkerExtension"
HY_TRANSFER_BACKEND = "hy_shm"
HY_MIDDLEWARE = "hy_vllm.auth.RequireRunKey"
VLLM_SERVER = "vllm.entrypoints.openai.api_server"

_DESCRIPTION = """\
Start vLLM's OpenAI-compatible server as one of hy's engines: exec
python -m vllm.entrypoints.openai.api_server (this interpreter) with hy's
worker extension, hy_shm weight-transfer backend and run-key middleware
(HY_VLLM_API_KEY must be set; every route but /health needs
"Authorization: Bearer <key>"), vLLM's development routes, vLLM's sampling
defaults and processed log-probs."""

_EPILOG = """\
Every argument not listed above goes to vLLM's server unchanged (see its
--help); one of the above given again, in vLLM's spellings too
(--max_model_len, -tp, --flag=value), replaces serve's value: each flag
reaches vLLM once. --worker-extension-cls and --weight-transfer-config are
hy's (giving others is an error); --middleware adds one after hy's.

Clients send the served name as "model", or leave "model" out.

Without --max-num-batched-tokens, chunked prefill is off and vLLM sizes the
budget to hold a whole context (max(max-model-len, 2048 x parallel size)):
vLLM 0.32's CPU backend fails a seeded request whose prefill it splits
("CPU Generator does not use offset"). With it, chunked prefill stays on
and the budget must hold every prompt prefilled at once.

Example:
  HY_VLLM_API_KEY=$key python -m hy_vllm.serve --model DIR --port 8000 \\
      --max-model-len 4096 --max-num-seqs 64"""


def parser() -> argparse.ArgumentParser:
    """serve's argument parser (``parse_known_args``: what it does not
    know is vLLM's)."""
    ap = argparse.ArgumentParser(
        prog="python -m hy_vllm.serve", description=_DESCRIPTION,
        epilog=_EPILOG, allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    flag = argparse.BooleanOptionalAction
    ap.add_argument("--model", required=True,
                    help="model directory (config.json and tokenizer; "
                         "weights too with --load-format auto) or Hugging "
                         "Face id")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default: %(default)s)")
    ap.add_argument("--port", type=int, default=8000,
                    help="port to listen on (default: %(default)s)")
    ap.add_argument("--served-model-name", nargs="+", metavar="NAME",
                    default=[SERVED_MODEL_NAME],
                    help="the name(s) clients send as \"model\"; they may "
                         "also leave \"model\" out (default: hy)")
    ap.add_argument("--load-format", default="dummy",
                    help="vLLM's: dummy (random weights; hy's first weight "
                         "sync fills them), auto (the directory's), or "
                         "another of vLLM's (default: %(default)s)")
    ap.add_argument("--dtype", default="bfloat16",
                    help="the engine's; hy's weight file must match it "
                         "(default: %(default)s)")
    ap.add_argument("--max-model-len", type=int, default=None,
                    help="context length, prompt and response (default: "
                         "the model's)")
    ap.add_argument("--seed", type=int, default=0,
                    help="vLLM's seed (default: %(default)s)")
    ap.add_argument("--tensor-parallel-size", "-tp", type=int, default=1,
                    help="(default: %(default)s)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=None,
                    help="vLLM's token budget per step (default: chunked "
                         "prefill off and vLLM's budget, which holds a "
                         "whole context; see below)")
    ap.add_argument("--enable-chunked-prefill", action=flag, default=None,
                    help="(default: off without --max-num-batched-tokens, "
                         "vLLM's with it)")
    ap.add_argument("--enforce-eager", action=flag, default=True,
                    help="eager PyTorch, no graph capture or compilation "
                         "(default: on)")
    ap.add_argument("--generation-config", default="vllm",
                    help="vLLM's: 'vllm' takes vLLM's sampling defaults, "
                         "'auto' the model's generation_config.json "
                         "(default: %(default)s)")
    ap.add_argument("--logprobs-mode", default="processed_logprobs",
                    help="vLLM's; hy's trainer compares its own log-probs "
                         "with processed_logprobs, those of the "
                         "distribution sampled from (default: %(default)s)")
    ap.add_argument("--disable-log-stats", action=flag, default=True,
                    help="(default: on)")
    ap.add_argument("--disable-uvicorn-access-log", action=flag,
                    default=True, help="(default: on)")
    ap.add_argument("--worker-extension-cls", default=HY_EXTENSION,
                    help="hy's: only %(default)s")
    ap.add_argument("--weight-transfer-config",
                    default=json.dumps({"backend": HY_TRANSFER_BACKEND}),
                    help="hy's: only backend hy_shm")
    ap.add_argument("--middleware", action="append", default=[],
                    help="an ASGI middleware to add after hy's key "
                         "middleware (repeatable)")
    ap.add_argument("--print", action="store_true",
                    help="print vLLM's command line (shell-quoted) instead "
                         "of running it")
    return ap


def _vllm_spelling(args: Sequence[str]) -> list[str]:
    """``args`` with each long flag's name in dashes (``--max_model_len=8``
    -> ``--max-model-len=8``), as vLLM's own parser reads them."""
    out = []
    for a in args:
        if a.startswith("--") and len(a) > 2:
            name, eq, value = a.partition("=")
            a = name.replace("_", "-") + eq + value
        out.append(a)
    return out


def parse(args: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """serve's flags and the arguments it passes to vLLM unchanged.

    Args:
      args: the command line after ``-m hy_vllm.serve``.

    Returns:
      (argparse.Namespace, list of str): serve's flags, and the rest in
      order.

    Raises:
      ValueError: a setting that is hy's was given another value.
      SystemExit: argparse's own errors (a missing ``--model``, a bad
        number), with its usage message; ``--help``.
    """
    ns, rest = parser().parse_known_args(_vllm_spelling(args))
    if ns.worker_extension_cls != HY_EXTENSION:
        raise ValueError(
            f"--worker-extension-cls {ns.worker_extension_cls}: hy's weight "
            f"sync needs {HY_EXTENSION} (it registers the hy_shm backend); "
            f"serve sets it, leave the flag out")
    try:
        backend = json.loads(ns.weight_transfer_config).get("backend")
    except (ValueError, AttributeError):
        backend = None
    if backend != HY_TRANSFER_BACKEND:
        raise ValueError(
            f"--weight-transfer-config {ns.weight_transfer_config}: hy's "
            f"weight sync needs {{\"backend\": \"{HY_TRANSFER_BACKEND}\"}}; "
            f"serve sets it, leave the flag out")
    return ns, rest


def vllm_argv(ns: argparse.Namespace, rest: Sequence[str],
              python: StrPath | None = None) -> list[str]:
    """vLLM's command line for serve's flags ``ns`` and the arguments
    ``rest`` it passes on (``parse``'s two results); ``python``: vLLM's
    interpreter (default: this one)."""
    argv = [str(python or sys.executable), "-m", VLLM_SERVER,
            "--model", str(ns.model),
            "--served-model-name", *ns.served_model_name,
            "--host", ns.host, "--port", str(ns.port),
            "--dtype", ns.dtype,
            "--load-format", ns.load_format,
            "--enforce-eager" if ns.enforce_eager else "--no-enforce-eager"]
    if ns.max_model_len is not None:
        argv += ["--max-model-len", str(ns.max_model_len)]
    argv += ["--tensor-parallel-size", str(ns.tensor_parallel_size),
             "--seed", str(ns.seed),
             "--worker-extension-cls", ns.worker_extension_cls,
             "--weight-transfer-config", ns.weight_transfer_config]
    for m in [HY_MIDDLEWARE] + [m for m in ns.middleware
                                if m != HY_MIDDLEWARE]:
        argv += ["--middleware", m]
    # vLLM's sampling defaults, not generation_config.json's; the log-probs
    # of the distribution sampled from (after temperature), as the trainer
    # computes its own.
    argv += ["--generation-config", ns.generation_config,
             "--logprobs-mode", ns.logprobs_mode]
    # See the module's "Token budget".
    chunked = ns.enable_chunked_prefill
    if chunked is None and ns.max_num_batched_tokens is None:
        chunked = False
    if chunked is not None:
        argv.append("--enable-chunked-prefill" if chunked
                    else "--no-enable-chunked-prefill")
    if ns.max_num_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(ns.max_num_batched_tokens)]
    if ns.disable_log_stats:
        argv.append("--disable-log-stats")  # vLLM has no --no- form.
    if ns.disable_uvicorn_access_log:
        argv.append("--disable-uvicorn-access-log")
    return argv + list(rest)


def command(model: StrPath, port: int, dtype: str = "bfloat16",
            max_model_len: int | None = 64, seed: int = 0,
            tensor_parallel_size: int = 1, dummy: bool = True,
            quiet: bool = True, python: StrPath | None = None,
            max_num_batched_tokens: int | None = None,
            served_model_name: str = SERVED_MODEL_NAME,
            extra: Sequence[str] = ()) -> list[str]:
    """vLLM's argv for one of hy's engines on 127.0.0.1:``port``, as
    ``python -m hy_vllm.serve`` makes it (``Engine`` runs it).

    Args:
      model: the model directory.
      port: the port.
      dtype: the engine's dtype.
      max_model_len: the context length (None: the model's).
      seed: vLLM's seed.
      tensor_parallel_size: the engine's.
      dummy: random weights until the first sync (``--load-format
        dummy``); False loads the directory's.
      quiet: no per-interval stats and no access log.
      python: vLLM's interpreter (default: this one).
      max_num_batched_tokens: vLLM's token budget per step (None: chunked
        prefill off and vLLM's budget; see the module's "Token budget").
      served_model_name: the name the engine answers to.
      extra: further serve or vLLM arguments, as on serve's command line.

    Raises:
      ValueError: as ``parse``.
    """
    args = ["--model", str(model), "--port", str(port), "--dtype", dtype,
            "--seed", str(seed),
            "--tensor-parallel-size", str(tensor_parallel_size),
            "--load-format", "dummy" if dummy else "auto",
            "--served-model-name", served_model_name]
    if max_model_len is not None:
        args += ["--max-model-len", str(max_model_len)]
    if max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if not quiet:
        args += ["--no-disable-log-stats", "--no-disable-uvicorn-access-log"]
    ns, rest = parse(args + list(extra))
    return vllm_argv(ns, rest, python=python)


def environment(key: str, kv_cache_gib: int = 1,
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The engine's environment: ``base`` (default os.environ) plus the
    run's key, the development routes hy's sync uses, hy_vllm's directory
    on the path where it is a source tree (``PATH_DIR``) and vLLM's CPU
    settings (no core pinning: the trainer has the cores)."""
    env = dict(os.environ if base is None else base)
    path = env.get("PYTHONPATH")
    if PATH_DIR is not None:
        env["PYTHONPATH"] = str(PATH_DIR) + (":" + path if path else "")
    env.update(VLLM_SERVER_DEV_MODE="1", HY_VLLM_API_KEY=key,
               VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib),
               VLLM_CPU_OMP_THREADS_BIND="nobind", VLLM_NO_USAGE_STATS="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SHM_DIR = "/dev/shm"
SHM_PREFIXES = ("psm_", "sem.mp-")  # multiprocessing's named segments.


def _live_group(pid: int) -> int | None:
    """The process group of ``pid``, None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[2])


def mapped_segments(pgid: int | None = None) -> set[str]:
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


def reclaim_segments(pgid: int, seen: set[str],
                     wait: float = 5.0) -> list[str]:
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
    within ``timeout`` seconds (its log says why).

    ``python`` is vLLM's interpreter (default: this one); ``kwargs`` go to
    ``command``. The engine finds hy_vllm through ``PATH_DIR`` (a source
    tree) or, where hy_vllm is installed in site-packages, in ``python``'s
    own environment: install hystate there too."""

    def __init__(self, model: StrPath, log_path: StrPath,
                 dtype: str = "bfloat16", dummy: bool = True,
                 python: StrPath | None = None, timeout: float = 600,
                 **kwargs: Any) -> None:
        self.port = free_port()
        self.key = os.urandom(16).hex()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log: IO[str] = open(log_path, "w")
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

    def request(self, path: str, body: Any = None, key: bool = True,
                timeout: float = 120) -> Any:
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

    def greedy(self, prompts: Sequence[Sequence[int]],
               n: int) -> list[tuple[list[int], list[float]]]:
        """(token ids, log-probs) of ``n`` greedy tokens after each prompt
        (a list of token ids), end of sequence ignored. The requests leave
        "model" out: vLLM takes the served model, whatever its name."""
        out = []
        for p in prompts:
            c = self.request("/v1/completions", {
                "prompt": list(p), "max_tokens": n,
                "temperature": 0, "logprobs": 0, "return_token_ids": True,
                "ignore_eos": True})
            ch = c["choices"][0]
            out.append((ch["token_ids"], ch["logprobs"]["token_logprobs"]))
        return out

    def close(self) -> None:
        seen = mapped_segments(self.proc.pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        reclaim_segments(self.proc.pid, seen)
        if not self.log.closed:
            self.log.close()


def main(args: Sequence[str] | None = None) -> None:
    """``python -m hy_vllm.serve``: parses, then prints or execs vLLM's
    server (see the module). Exits 2 with a message for a bad command line
    or a missing ``HY_VLLM_API_KEY``."""
    ap = parser()
    try:
        ns, rest = parse(sys.argv[1:] if args is None else args)
    except ValueError as e:
        ap.error(str(e))
    argv = vllm_argv(ns, rest)
    if ns.print:
        print(shlex.join(argv))
        return
    if not os.environ.get("HY_VLLM_API_KEY"):
        ap.error("set HY_VLLM_API_KEY to the engine's key (every route but "
                 "/health needs it; hy_vllm.auth.RequireRunKey)")
    # Run by hand: what hyctl train's keeper sets, where the caller has
    # not set it.
    for k, v in environment(os.environ["HY_VLLM_API_KEY"], base={}).items():
        if k != "PYTHONPATH":
            os.environ.setdefault(k, v)
    path = os.environ.get("PYTHONPATH", "")
    if PATH_DIR is not None and str(PATH_DIR) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(PATH_DIR) + (
            os.pathsep + path if path else "")
    sys.stdout.flush()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
