"""Every benchmark command docs/tour.md lists runs, shortened: each one of
its "Benchmarks" table, with the arguments below added (a small state,
one repetition) and --json, exits 0 and prints JSON (one document, or one
object per line); the C++ ones also print their table. A GPU bench on a
machine without one says so and exits 0. A command the table gains
without an entry here fails the test; one that cannot run here says why.

The figures are not checked (a benchmark is measured, not asserted): this
proves that the commands a reader copies work on a fresh build.

Environment: HY_SOURCE_DIR (the repository), HY_BUILD_DIR (its build
tree, default HY_SOURCE_DIR/build).
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(os.environ.get("HY_SOURCE_DIR",
                          Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("HY_BUILD_DIR", SRC / "build"))
# SmolLM2 for real_model_bench.py, fetched as CTest cli.real_model does.
MODEL = Path(os.environ.get("HY_MODEL_CACHE",
                            Path.home() / ".cache" / "hy" / "models")) / \
    "smollm2-135m-instruct"

# Command (as the table writes it) -> the arguments that shorten it, or
# ("not run", why). {scratch} is a directory of the test's own, {model}
# SmolLM2-135M-Instruct's.
SHORT = {
    "build/bin/hy_bench_codec": "--size-mib 2 --reps 1",
    "build/bin/hy_bench_store": "--size-mib 16 --dir {scratch}",
    "PYTHONPATH=build/python .venv/bin/python3 bench/py_bench_save.py":
        "--gib 0.02 --ranks 2 --dir {scratch}",
    "build/bin/hy_bench_recovery": "--gib 0.02 --ranks 2 --dir {scratch}",
    "build/bin/hy_bench_train_scale": "--model small --ranks 2 "
                                      "--dir {scratch}",
    "scripts/scale-grpo.sh": ("not run", "494M parameters on 4 ranks take "
                              "20 GB and 5 minutes; hy_bench_train_scale "
                              "above runs the same trainer paths small"),
    # The rollout rows alone: the whole --quick run takes over 15 minutes.
    ".venv/bin/python bench/real_model_bench.py":
        "--quick --only-rollout --model {model}",
    ".venv/bin/python bench/real_model_recovery.py": (
        "not run", "the real-model job whole (24 minutes); CTest "
        "cli.real_model runs it shortened, a worker killed and resumed"),
    ".venv-vllm/bin/python3 bench/vllm_sync_bench.py":
        "--model demo --reps 1 --restart-reps 1 --demo-iterations 0 "
        "--changed 0.05 --skip verl restart",
    "scripts/bench-reshard-link.sh": "--smoke",
    "scripts/bench-vllm-link.sh": "--model demo --reps 1 --rates 10 "
                                  "--only hy",
    "build/bin/hy_bench_reshard_nccl": "",
    "build/bin/hy_bench_gpu_save": "",
}

# What a bench prints instead of figures where it cannot run here.
NO_DEVICE = re.compile(r"no CUDA device")
SKIP_EXIT = 77  # The link benches without root / CAP_NET_ADMIN.


def table_commands():
    """The commands of docs/tour.md's "Benchmarks" table, in order."""
    text = (SRC / "docs" / "tour.md").read_text()
    section = text.split("## Benchmarks", 1)[1]
    out = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        out += re.findall(r"`([^`]+)`", first)
    return out


def parse_json(text):
    """The JSON a bench printed: one document, or one object per line."""
    text = text.strip()
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return [json.loads(l) for l in text.splitlines()
                if l.startswith("{")]


def run(command, scratch, extra, timeout=900):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                        "MASTER_PORT")}
    argv = shlex.split(command)
    while argv and re.match(r"^\w+=", argv[0]):
        k, v = argv.pop(0).split("=", 1)
        env[k] = str(BUILD / v[len("build/"):]) if v.startswith("build/") \
            else v
    if argv[0].startswith("build/"):
        argv[0] = str(BUILD / argv[0][len("build/"):])
    argv += shlex.split(extra.format(scratch=scratch, model=MODEL))
    return subprocess.run(argv, cwd=SRC, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_table_has_an_entry_for_every_command():
    listed = table_commands()
    assert len(listed) >= 10, listed
    missing = [c for c in listed if c not in SHORT]
    assert not missing, (f"docs/tour.md lists {missing}: add them to "
                         "tests/docs/bench_commands_test.py's SHORT")
    stale = [c for c in SHORT if c not in listed]
    assert not stale, f"SHORT has {stale}, which docs/tour.md no longer lists"


@pytest.mark.parametrize("command", table_commands())
def test_bench_runs_shortened(command, tmp_path):
    entry = SHORT.get(command)
    if entry is None:
        pytest.fail(f"{command}: no entry in SHORT")
    if isinstance(entry, tuple):
        pytest.skip(f"{command}: {entry[1]}")
    if "{model}" in entry:
        f = subprocess.run(["bash", SRC / "scripts" / "fetch-model.sh",
                            "smollm2-135m-instruct", MODEL],
                           capture_output=True, text=True)
        if f.returncode == 75:
            pytest.skip(f"SmolLM2 could not be fetched (no network): {f.stderr}")
        assert f.returncode == 0, f.stdout + f.stderr
    if command.startswith(".venv-vllm/") and \
            not (SRC / ".venv-vllm" / "bin" / "python3").exists():
        pytest.skip("no .venv-vllm (scripts/install-deps.sh makes it)")
    p = run(command, tmp_path, entry + " --json")
    out = p.stdout + p.stderr
    if p.returncode == SKIP_EXIT:
        pytest.skip(f"{command} skipped itself: {out.strip()[-300:]}")
    assert p.returncode == 0, f"{command} {entry}: exit {p.returncode}\n" \
                              f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    if NO_DEVICE.search(out):
        print(f"{command}: {out.strip()[-200:]}")
        return
    docs = parse_json(p.stdout)
    assert docs and all(isinstance(d, dict) and d for d in docs), \
        f"{command}: no JSON objects in\n{p.stdout[-3000:]}"
    print(f"{command} {entry.format(scratch=tmp_path, model=MODEL)}: "
          f"{len(docs)} JSON object(s)")
    if command.startswith("build/bin/"):
        # The table a reader sees, from the same arguments.
        t = run(command, tmp_path, entry)
        assert t.returncode == 0, t.stderr[-3000:]
        assert len(t.stdout.strip().splitlines()) >= 2, t.stdout
        with pytest.raises(json.JSONDecodeError):
            json.loads(t.stdout)
