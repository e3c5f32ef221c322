"""hystate._hy takes its C++ runtime from libstdc++.so.6 even when torch is
imported into the process's global scope (TORCH_USE_RTLD_GLOBAL=1).

PyTorch's libraries export copies of parts of libstdc++ (std::filesystem,
std::string, streams). With torch's libraries in the global scope, a plainly
imported extension has its std:: calls bound to those copies; torch 2.11's
libtorch.so's remove_all jumps to address 0 on a non-empty directory, so
hystate.save over a leftover half-made store segfaulted there. hy imports its
extension with RTLD_DEEPBIND (hy/__init__.py). The dynamic loader's own
record (LD_DEBUG=bindings, every symbol bound at import with LD_BIND_NOW)
says where each of the module's references went.

Run by CTest (python.runtime_binding) against the installed package.
"""

import os
import re
import subprocess
import sys

import hystate

# "binding file <object> [0] to <object> [0]: normal symbol `<mangled>' ..."
BINDING = re.compile(
    r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")
STD = re.compile(r"^_Z(N|NK|TI|TV|TS)?St")
TORCH_LIB = re.compile(r"/(libtorch[^/]*|libc10[^/]*)\.so")


def run_python(code, env_extra, tmp_path):
    env = dict(os.environ, TORCH_USE_RTLD_GLOBAL="1", **env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path))


def module_bindings(tmp_path):
    """(target object, mangled symbol) of every std:: reference of hystate._hy,
    in a process that imported torch into its global scope first."""
    log = tmp_path / "ld"
    r = run_python("import torch, hystate", {
        "LD_BIND_NOW": "1", "LD_DEBUG": "bindings",
        "LD_DEBUG_OUTPUT": str(log)}, tmp_path)
    assert r.returncode == 0, r.stderr
    module = os.path.basename(hystate._hy.__file__)
    out = []
    for f in tmp_path.glob("ld.*"):
        for line in f.read_text(errors="replace").splitlines():
            m = BINDING.search(line)
            if m and os.path.basename(m.group(1)) == module and \
                    STD.match(m.group(3)):
                out.append((m.group(2), m.group(3)))
    return out


def test_std_symbols_bind_to_libstdcxx_with_torch_global(tmp_path):
    bindings = module_bindings(tmp_path)
    to_libstdcxx = [b for b in bindings if "libstdc++.so" in b[0]]
    assert to_libstdcxx, f"no std:: binding of hystate._hy recorded: {bindings[:5]}"
    into_torch = [b for b in bindings if TORCH_LIB.search(b[0])]
    assert not into_torch, (
        f"{len(into_torch)} std:: references of hystate._hy bound into LibTorch, "
        f"e.g. {into_torch[:5]}")


def test_save_over_a_leftover_half_made_store_with_torch_global(tmp_path):
    # A save killed while creating its store leaves a hidden sibling folder,
    # which the next creation removes (std::filesystem::remove_all).
    root = tmp_path / "ckpt"
    leftover = root / "node-0" / ".store.hy-creating-999"
    leftover.mkdir(parents=True)
    (leftover / "LOCK").write_text("x")
    code = ("import torch, numpy as np, hystate\n"
            f"hystate.save({str(root)!r}, {{'w': np.arange(8, dtype=np.float32)}})\n"
            "t = {'w': np.zeros(8, dtype=np.float32)}\n"
            f"hystate.load({str(root)!r}, t)\n"
            "assert (t['w'] == np.arange(8)).all()\n")
    r = run_python(code, {}, tmp_path)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stderr}"
    assert not leftover.exists()
    assert (root / "node-0" / "store").is_dir()
