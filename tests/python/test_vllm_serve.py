"""python -m hy_vllm.serve's command line, without vLLM: what it passes to
vLLM's server (``--print``) for its own flags, for flags it does not know
(passed through unchanged, in order), and for flags given in both (each
reaches vLLM once); hy's settings it refuses to change; and that importing
hy_vllm.serve imports neither vLLM nor torch. The installed hy_vllm
(hystate's wheel ships it) where HY_PY_ENV puts one on the path, else the
source tree's.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(os.environ.get("HY_SOURCE_DIR",
                          Path(__file__).resolve().parents[2]))
sys.path.append(str(SRC / "python"))  # After an installed hy_vllm.
from hy_vllm import serve  # noqa: E402

HY_SETTINGS = ["--worker-extension-cls", "hy_vllm.worker.HyWorkerExtension",
               "--weight-transfer-config", '{"backend": "hy_shm"}',
               "--middleware", "hy_vllm.auth.RequireRunKey"]


def argv(*args):
    """vLLM's argv (after the interpreter and ``-m``) for serve's ``args``."""
    ns, rest = serve.parse(list(args))
    out = serve.vllm_argv(ns, rest, python="PY")
    assert out[:3] == ["PY", "-m", "vllm.entrypoints.openai.api_server"]
    return out[3:]


def flags(a):
    """{flag: [values]} of an argv: each long flag's name with a ``--no-``
    form counted as the flag, its values the tokens up to the next flag."""
    out = {}
    name = None
    for t in a:
        if t.startswith("-") and not t.lstrip("-").isdigit():
            name, _, value = t.partition("=")
            if name.startswith("--no-"):
                name = "--" + name[5:]
            out.setdefault(name, []).append(t)
            if value:
                out[name].append(value)
        else:
            out[name].append(t)
    return out


def once(a):
    """Every flag of ``a`` but --middleware occurs once; the middleware
    names are distinct."""
    counts = {}
    for t in a:
        if t.startswith("--"):
            n = t.partition("=")[0]
            n = "--" + n[5:] if n.startswith("--no-") else n
            counts[n] = counts.get(n, 0) + 1
    twice = {n: c for n, c in counts.items()
             if c > 1 and n != "--middleware"}
    assert not twice, (twice, a)
    m = [a[i + 1] for i, t in enumerate(a) if t == "--middleware"]
    assert len(m) == len(set(m)), a


def value(a, flag):
    i = a.index(flag)
    return a[i + 1]


def test_defaults_are_hys_engine():
    a = argv("--model", "/m")
    once(a)
    assert value(a, "--model") == "/m"
    assert value(a, "--served-model-name") == "hy"
    assert value(a, "--host") == "127.0.0.1"
    assert value(a, "--port") == "8000"
    assert value(a, "--load-format") == "dummy"
    assert value(a, "--dtype") == "bfloat16"
    assert value(a, "--seed") == "0"
    assert value(a, "--tensor-parallel-size") == "1"
    assert value(a, "--generation-config") == "vllm"
    assert value(a, "--logprobs-mode") == "processed_logprobs"
    for i in range(0, len(HY_SETTINGS), 2):
        assert value(a, HY_SETTINGS[i]) == HY_SETTINGS[i + 1]
    assert "--enforce-eager" in a
    assert "--disable-log-stats" in a and "--disable-uvicorn-access-log" in a
    # The model's own context length; without a budget, chunked prefill
    # off (vLLM then sizes the budget to a whole context).
    assert "--max-model-len" not in a
    assert "--max-num-batched-tokens" not in a
    assert "--no-enable-chunked-prefill" in a


def test_serves_own_flags():
    a = argv("--model", "/m", "--served-model-name", "a", "b",
             "--host", "0.0.0.0", "--port", "9000", "--load-format", "auto",
             "--dtype", "float32", "--max-model-len", "4096", "--seed", "7",
             "--tensor-parallel-size", "2", "--max-num-batched-tokens",
             "8192", "--no-enforce-eager", "--generation-config", "auto",
             "--no-disable-log-stats", "--no-disable-uvicorn-access-log")
    once(a)
    f = flags(a)
    assert f["--served-model-name"] == ["--served-model-name", "a", "b"]
    assert value(a, "--host") == "0.0.0.0"
    assert value(a, "--port") == "9000"
    assert value(a, "--load-format") == "auto"
    assert value(a, "--dtype") == "float32"
    assert value(a, "--max-model-len") == "4096"
    assert value(a, "--seed") == "7"
    assert value(a, "--tensor-parallel-size") == "2"
    assert value(a, "--generation-config") == "auto"
    # A budget given: chunked prefill stays vLLM's (on).
    assert value(a, "--max-num-batched-tokens") == "8192"
    assert "--enable-chunked-prefill" not in f
    assert "--no-enforce-eager" in a and "--enforce-eager" not in a
    assert "--disable-log-stats" not in a
    assert "--disable-uvicorn-access-log" not in a


def test_chunked_prefill_given_wins():
    a = argv("--model", "/m", "--enable-chunked-prefill")
    once(a)
    assert "--enable-chunked-prefill" in a
    assert "--max-num-batched-tokens" not in a
    a = argv("--model", "/m", "--max-num-batched-tokens", "256",
             "--no-enable-chunked-prefill")
    once(a)
    assert "--no-enable-chunked-prefill" in a
    assert value(a, "--max-num-batched-tokens") == "256"


def test_unknown_arguments_pass_through_unchanged_in_order():
    extra = ["--max-num-seqs", "4", "--api-key", "k",
             "--chat-template", "/t/chat.jinja", "--kv-cache-dtype=auto",
             "--compilation-config", '{"mode": 0}', "-pp", "1",
             "--enable-prefix-caching", "--limit-mm-per-prompt.image", "0"]
    a = argv("--model", "/m", *extra)
    once(a)
    assert a[-len(extra):] == extra
    # Mixed with serve's own flags, still in order and unchanged.
    a = argv("--max-num-seqs", "4", "--model", "/m", "--api-key", "k",
             "--port", "1", "--chat-template", "/t/chat.jinja")
    once(a)
    assert a[-6:] == ["--max-num-seqs", "4", "--api-key", "k",
                      "--chat-template", "/t/chat.jinja"]
    assert value(a, "--port") == "1"


def test_a_flag_given_again_replaces_serves_value():
    # The flags serve sets, given in vLLM's spellings: each reaches vLLM
    # once, with the value given.
    a = argv("--model", "/m", "--enforce-eager", "--max_model_len=128",
             "-tp", "2", "--seed=3", "--served_model_name", "x",
             "--disable-log-stats", "--load_format", "auto",
             "--logprobs-mode", "raw_logprobs", "--host=::1",
             "--middleware", "hy_vllm.auth.RequireRunKey",
             "--middleware", "other.Middleware", *HY_SETTINGS[:4])
    once(a)
    assert value(a, "--max-model-len") == "128"
    assert value(a, "--tensor-parallel-size") == "2"
    assert value(a, "--seed") == "3"
    assert value(a, "--served-model-name") == "x"
    assert value(a, "--load-format") == "auto"
    assert value(a, "--logprobs-mode") == "raw_logprobs"
    assert value(a, "--host") == "::1"
    assert "-tp" not in a
    m = [a[i + 1] for i, t in enumerate(a) if t == "--middleware"]
    assert m == ["hy_vllm.auth.RequireRunKey", "other.Middleware"]
    a = argv("--model", "/m", "--no-enforce-eager", "--enforce-eager")
    once(a)
    assert "--enforce-eager" in a  # The last one given, as argparse reads.


@pytest.mark.parametrize("bad, why", [
    (["--worker-extension-cls", "my.Ext"], "hy_vllm.worker.HyWorkerExtension"),
    (["--weight-transfer-config", '{"backend": "nccl"}'], "hy_shm"),
    (["--weight-transfer-config", "nccl"], "hy_shm"),
])
def test_hys_settings_cannot_be_changed(bad, why):
    with pytest.raises(ValueError, match=why):
        serve.parse(["--model", "/m", *bad])
    p = run("--print", "--model", "/m", *bad)
    assert p.returncode == 2 and why in p.stderr, p.stderr
    assert p.stdout == ""


def test_engine_keepers_command_line():
    """launcher/engine_keeper.cc's flags: the argv it had before serve took
    pass-through arguments (chunked prefill vLLM's: a budget is given)."""
    a = argv("--model", "/run/engines/model", "--port", "41000",
             "--dtype", "float32", "--max-model-len", "128",
             "--tensor-parallel-size", "1", "--seed", "5",
             "--max-num-batched-tokens", "2048")
    once(a)
    assert a == ["--model", "/run/engines/model",
                 "--served-model-name", "hy",
                 "--host", "127.0.0.1", "--port", "41000",
                 "--dtype", "float32", "--load-format", "dummy",
                 "--enforce-eager", "--max-model-len", "128",
                 "--tensor-parallel-size", "1", "--seed", "5",
                 *HY_SETTINGS,
                 "--generation-config", "vllm",
                 "--logprobs-mode", "processed_logprobs",
                 "--max-num-batched-tokens", "2048",
                 "--disable-log-stats", "--disable-uvicorn-access-log"]


def test_command_is_serves_argv():
    """serve.command (what Engine runs) is the same command line."""
    got = serve.command("/m", 5, dtype="float32", max_model_len=256,
                        python="PY", quiet=False,
                        extra=["--max-num-seqs", "2"])
    want = serve.vllm_argv(*serve.parse([
        "--model", "/m", "--port", "5", "--dtype", "float32",
        "--max-model-len", "256", "--no-disable-log-stats",
        "--no-disable-uvicorn-access-log", "--max-num-seqs", "2"]),
        python="PY")
    assert got == want
    once(got[3:])


def run(*args, env=None):
    """python -m hy_vllm.serve ``args`` in a child (this interpreter, the
    same path), outside the repository."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join(
        p for p in [e.get("PYTHONPATH"), str(SRC / "python")] if p)
    return subprocess.run([sys.executable, "-m", "hy_vllm.serve", *args],
                          capture_output=True, text=True, env=e, cwd="/",
                          timeout=60)


def test_print_is_the_command_line_shell_quoted():
    args = ["--model", "/m dir", "--port", "8001",
            "--max-num-seqs", "4", "--chat-template", "{{ x }}"]
    p = run("--print", *args)
    assert p.returncode == 0, p.stderr
    got = shlex.split(p.stdout)
    ns, rest = serve.parse(args)
    assert got == serve.vllm_argv(ns, rest, python=got[0])
    assert value(got, "--model") == "/m dir"
    assert got[-2:] == ["--chat-template", "{{ x }}"]


def test_without_the_key_it_exits_with_a_message():
    env = {k: v for k, v in os.environ.items() if k != "HY_VLLM_API_KEY"}
    p = run("--model", "/m", env=env)
    assert p.returncode == 2
    assert "HY_VLLM_API_KEY" in p.stderr, p.stderr


def test_help_names_the_pass_through():
    p = run("--help")
    assert p.returncode == 0, p.stderr
    for w in ("--served-model-name", "--load-format", "--host",
              "goes to vLLM's server unchanged", "once",
              "CPU Generator does not use offset"):
        assert w in " ".join(p.stdout.split()), w


def test_serve_and_auth_import_neither_vllm_nor_torch():
    code = ("import sys, hy_vllm.serve, hy_vllm.auth; "
            "print(sorted(m for m in ('vllm', 'torch') if m in sys.modules))")
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(
        p for p in [e.get("PYTHONPATH"), str(SRC / "python")] if p)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=e, cwd="/", timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
