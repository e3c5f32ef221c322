"""The Python package's reference is complete and current:
- every public name of hystate, hystate.dcp and hystate.vllm (and every public method of
  their classes) has a docstring, and every call that can fail names its
  errors ("Raises ...");
- docs/api is what scripts/api-docs.sh (pdoc, warnings as errors) writes
  from the installed package now;
- mypy --strict passes on examples/ against the package's annotations and
  stubs;
- python -m hystate says what the package does.
Run by CTest (python.api) against the pip-installed package."""

import filecmp
import inspect
import os
import subprocess
import sys
from pathlib import Path

import hystate
import hystate.dcp
import hystate.vllm

SRC = Path(__file__).resolve().parents[2]


def public(mod):
    for name in getattr(mod, "__all__", None) or [
            n for n in vars(mod) if not n.startswith("_")]:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or getattr(obj, "__module__", mod.__name__) \
                not in (mod.__name__, "hystate"):
            continue
        yield f"{mod.__name__}.{name}", obj
        if inspect.isclass(obj):
            for m, f in vars(obj).items():
                if not m.startswith("_") and callable(f):
                    yield f"{mod.__name__}.{name}.{m}", f


def test_every_public_name_is_documented_with_its_errors():
    undocumented = [n for mod in (hystate, hystate.dcp, hystate.vllm)
                    for n, o in public(mod) if not inspect.getdoc(o)]
    assert not undocumented, undocumented
    fallible = [hystate.save, hystate.save_async, hystate.load, hystate.open,
                hystate.plan, hystate.reshard, hystate.Shard,
                hystate.SaveHandle.wait, hystate.Checkpoints.tensors,
                hystate.Checkpoints.verify, hystate.Checkpoints.gc,
                hystate.dcp.HyStorageWriter.write_data,
                hystate.dcp.HyStorageWriter.finish,
                hystate.dcp.HyStorageReader.read_metadata,
                hystate.dcp.HyStorageReader.read_data,
                hystate.vllm.EngineSync.push]
    silent = [f.__qualname__ for f in fallible
              if "raise" not in inspect.getdoc(f).lower()]
    assert not silent, f"these do not say what they raise: {silent}"


def docstrings(mod):
    yield mod.__name__, inspect.getdoc(mod) or ""
    for name, obj in public(mod):
        yield name, inspect.getdoc(obj) or ""


def test_no_code_span_crosses_a_line_break():
    # Markdown renderers differ on a ``span`` that goes on past a line's
    # end (markdown2 2.5.6 breaks it apart; earlier ones did not), so the
    # reference would depend on the renderer's version, not the text.
    crossing = [f"{name}: {line.strip()}"
                for mod in (hystate, hystate.dcp, hystate.vllm)
                for name, doc in docstrings(mod)
                for line in doc.splitlines() if line.count("``") % 2]
    assert not crossing, crossing


def test_the_committed_reference_is_current(tmp_path):
    out = tmp_path / "api"
    where = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    p = subprocess.run(["bash", SRC / "scripts/api-docs.sh", out],
                       capture_output=True, text=True,
                       env=dict(os.environ, HY_PYTHON=sys.executable,
                                HY_PYTHONPATH=where))
    assert p.returncode == 0, p.stdout + p.stderr  # pdoc -W error.
    committed = SRC / "docs" / "api"
    cmp = filecmp.dircmp(committed, out)
    stale = []

    def walk(c, prefix=""):
        stale.extend(prefix + n for n in
                     c.diff_files + c.left_only + c.right_only)
        for name, sub in c.subdirs.items():
            walk(sub, f"{prefix}{name}/")
    walk(cmp)
    assert not stale, (f"docs/api is stale ({stale}): run "
                       "scripts/api-docs.sh and commit docs/api")


def test_examples_pass_mypy_strict():
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict",
                        "--no-incremental", str(SRC / "examples")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_python_m_hystate_says_what_it_does():
    out = subprocess.run([sys.executable, "-m", "hystate"], check=True,
                         capture_output=True, text=True).stdout
    assert out.startswith("hystate: hy's versioned"), out
    for name in ("hystate.save ", "hystate.load ", "hystate.open ",
                 "hystate.DataLoss", "hystate.dcp.HyStorageWriter",
                 "hystate.vllm.EngineSync"):
        assert name in out, (name, out)
